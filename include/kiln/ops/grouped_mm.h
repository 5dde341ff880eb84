// torch.nn.functional.grouped_mm (ATen `_grouped_mm`) and kiln's FP8-weight variant.
//
// grouped_mm(mat_a, mat_b, offs, bias, out_dtype): a batch of matrix products whose group
// sizes come from offs, int32 exclusive cumulative ends (group g spans [offs[g-1], offs[g]),
// offs[-1] = 0):
//   2D x 3D  A [M_total, K], B [G, K, N], offs [G]  -> [M_total, N]  out[s:e] = A[s:e] @ B[g]
//   3D x 2D  A [G, M, K], B [K, N_total], offs [G]  -> [M, N_total]  out[:, s:e] = A[g] @ B[:, s:e]
//   2D x 2D  A [M, K_total], B [K_total, N], offs [G] -> [G, M, N]   out[g] = A[:, s:e] @ B[s:e]
//   3D x 3D  A [G, M, K], B [G, K, N], no offs       -> [G, M, N]    bmm
// dtypes: float32, bfloat16, float16 (mat_a and mat_b alike); accumulation in float32,
// output in mat_a's dtype. Each operand's last two dims are row- or column-major (so the
// MoE weight view w.transpose(-2, -1) of a [G, N, K] tensor is read in place, not copied).
// Empty groups write nothing (2Dx3D, 3Dx2D) or zeros (2Dx2D). Rows (2Dx3D) or columns
// (3Dx2D) past offs[-1] are zeros (PyTorch leaves them uninitialised). The output is a
// contiguous tensor (PyTorch pads its row stride to 16 bytes; kiln does not).
//
// Errors, in PyTorch's order and wording (RuntimeError unless noted):
//   "Expected mat_a to be Float32, BFloat16 or Float16 matrix, got <dtype>" (and mat_b)
//   "mat_a has to be 2 or 3d" (and mat_b)
//   "contraction dimension of mat_a and mat_b must match, got <a> and <b>" (PyTorch
//     checks it only when either is 3-D; in 2D x 2D it slices A's columns and B's rows
//     separately, so mismatched K silently contracts over the shorter one)
//   "strides should be multiple of 16 bytes" (the leading stride of the last two dims)
//   "Invalid strides/sizes, got <strides> for strides and <sizes> for sizes"
//   "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d"
//   "offs has to be 1D", "Offsets have to be int32"
//   "Bias not supported yet"
//   "Grouped gemm output dtype must match `mat_a` dtype"
//   "matrix batch sizes have to match" (offs vs G), "batched dimension has to match" (3Dx3D)
//   "expected mat_a and mat_b to have the same dtype, but got: <a> != <b>" (PyTorch's CPU
//     fallback fails the same way inside mm)
// Narrower than PyTorch: offs must be non-decreasing and within the grouped dimension
// (ValueError); PyTorch's CPU fallback slices with Python clamping/wrapping instead.
//
// grouped_mm_fp8(mat_a, mat_b, scale, offs) — kiln's MoE extension of the 2D x 3D case with
// FP8 expert weights in the Hugging Face layout:
//   mat_a float32/bfloat16/float16 [M_total, K]; mat_b float8_e4m3fn [G, N, K] with
//   row-major last two dims (out = a @ w.T per group); scale float32 [G, N], one per
//   output column of each expert (w_real = w_fp8 * scale); offs int32 [G].
//   -> [M_total, N] in mat_a's dtype. Weights are decoded in the kernel and the scales
//   applied after the dot products (float32 accumulation). As in linear_fp8, the NaN
//   codes 0x7F/0xFF read as ±480 (quantisation never produces them).
#pragma once

#include <optional>

#include "kiln/tensor.h"

namespace kiln {

Tensor grouped_mm(const Tensor& mat_a, const Tensor& mat_b, const std::optional<Tensor>& offs = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, std::optional<DType> out_dtype = std::nullopt);

Tensor grouped_mm_fp8(const Tensor& mat_a, const Tensor& mat_b, const Tensor& scale, const Tensor& offs);

}  // namespace kiln
