// CPU kernels behind linear and linear_fp8 (internal; the front ends are
// src/ops/linear.cpp and src/ops/linear_fp8.cpp).
//
//   gemv_*        one activation row: y[n] = scale_n * sum_k x[k] W[n, k] + bias[n], a
//                 SIMD kernel per weight dtype (gemv_<dtype>.cpp, compiled per Highway
//                 target) that streams W once at memory speed. Decode is a bandwidth
//                 race: see gemv-inl.h for the instruction budget and the decode tricks.
//   linear_gemm   many rows: OpenBLAS sgemm/dgemm; narrow weights are widened to f32
//                 one panel at a time (accumulation in f32); bf16 and FP8 weights on a
//                 CPU with AVX512-BF16 go to the vdpbf16ps GEMM of bf16_dot_gemm.h instead.
//   fp8 quantise  row-wise quantisation to float8_e4m3fn and dequantisation.
#pragma once

#include <cstdint>

#include "backend/linear.h"
#include "kiln/dtype.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

using backend::Fp8ScaleLayout;
using backend::LinearActivations;
using backend::LinearWeight;

// Floats of per-call scratch the GEMV kernels need for x converted to f32 (K padded to
// whole SIMD steps on every target).
int64_t gemv_scratch_floats(int64_t K);

// One-row linear (act.M must be 1) for weight dtype float32 / bfloat16 / float16 (then
// act.dtype == weight.dtype) or float8_e4m3fn (act.dtype float32, bfloat16 or float16).
// K > 0. `x_scratch` holds gemv_scratch_floats(K) floats. Rows are split over the pool.
using GemvFn = void (*)(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);
void gemv_f32(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);
void gemv_bf16(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);
void gemv_f16(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);
void gemv_fp8(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);
// The GEMV kernel of a weight dtype, or nullptr (float64 and the rest go to linear_gemm).
GemvFn gemv_for(DType weight_dtype);

// The Highway targets (HWY_* bits) any GEMV kernel was compiled for (the FP8 kernel also
// has AVX3_DL); tests pin each one the CPU supports with hwy::SetSupportedTargetsForTest
// (a kernel without that target then runs its best lower one).
int64_t gemv_simd_targets();

// The one-row FP8 kernels (gemv_fp8, the MoE decode experts, the fused decode blocks),
// all compiled for the same targets: the Highway target (HWY_* bit) they dispatch to now,
// and whether they now take the bf16 dot path (gemv-inl.h), which rounds x and the MoE
// activations to bfloat16 (kiln::bf16_dot_enabled() on a target that has the path).
int64_t fp8_kernels_target();
bool fp8_kernels_round_x_to_bf16();

// Decodes `rows` rows of a float8_e4m3fn weight starting at row n0 into a contiguous
// float32 [rows, K] panel with the scales applied, exactly as the GEMV kernel reads them
// (so codes 0x7F/0xFF read as ±480, see gemv-inl.h).
void fp8_rows_to_f32(const LinearWeight& w, int64_t n0, int64_t rows, float* out);

// Any number of rows (including one, for float64) through OpenBLAS: float32/float64
// weights of act.dtype are read in place (rows packed first when BLAS cannot step over
// them), other weights are widened to f32 panels. K > 0, M > 0, N > 0.
void linear_gemm(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act);

// Row-wise float8_e4m3fn quantisation of an [N, K] float32 / bfloat16 / float16 matrix
// (rows at w + n * row_stride elements, unit inner stride): scale[n] = max_k |w[n, k]| / 448
// (1 for an all-zero row), q[n, k] = e4m3fn(w[n, k] / scale[n]) rounded to nearest even,
// q contiguous. Returns the first row holding inf or NaN (q and scale are then
// unspecified), or -1. With row_sq_error / row_sq_norm (both or neither), also writes per
// row sum_k (q[n, k] * scale[n] - w[n, k])^2 and sum_k w[n, k]^2 in float64, from the
// same pass (the quantisation error report of loading a model as FP8).
int64_t quantize_fp8_rows(ThreadPool& pool, const void* w, DType dtype, int64_t row_stride, int64_t N, int64_t K,
                          uint8_t* q, float* scale, double* row_sq_error = nullptr, double* row_sq_norm = nullptr);

// out[n, k] = float(W[n, k]) * its scale, in float32, contiguous [N, K]; the exact cast,
// so the NaN codes stay NaN (unlike the GEMV decode).
void dequantize_fp8_rows(ThreadPool& pool, const LinearWeight& w, float* out);

}  // namespace kiln::cpu
