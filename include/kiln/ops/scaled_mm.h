// FP8 scaled matrix products: torch.nn.functional.scaled_mm and the legacy torch._scaled_mm.
//
//   out = (float(A) * scale_a) @ (float(B) * scale_b) [+ bias], float32 accumulation, then
//   cast to the output dtype.
//   A [M, K] and B [K, N]: float8_e4m3fn or float8_e5m2 (either, mixed allowed as on
//   PyTorch CPU), any layout (PyTorch's CUDA path wants B column-major; the CPU takes both).
//   Scales are float32:
//     TensorWise  scale_a and scale_b each hold one element (numel() == 1)
//     RowWise     scale_a [M, 1] (unit stride along M), scale_b [1, N] (unit stride along N)
//   Both operands use the same recipe (PyTorch's CPU accepts only TensorWise x TensorWise
//   and RowWise x RowWise). The BlockWise recipes are a NotImplemented error.
//   bias: numel() == N ([N] or [1, N]), float32, bfloat16 or float16, added in float32.
//   Output dtypes: float32, bfloat16, float16, float8_e4m3fn, float8_e5m2 (fp8 output uses
//   kiln's saturating e4m3fn cast, spec §2.1).
//   M, N or K = 0: an [M, N] result; K = 0 gives the bias broadcast over the rows, or zeros.
//   (PyTorch's CPU F.scaled_mm returns zeros without the bias there; the legacy
//   _scaled_mm adds it, and so does kiln for both.)
//
// Errors follow PyTorch's CPU wording: "mat_a must be a matrix", "mat_a and mat_b shapes
// cannot be multiplied (MxK and KxN)", "Bias must be size N but got n", "Bias must be
// Float32 or BFloat16 or Half, but got <dtype>", "Invalid scaling configuration. ..." (a
// recipe whose scales do not match), "mat_a and mat_b must be fp8 types, got: ...",
// "scale_result must be a float scalar"; ValueError where PyTorch raises ValueError
// (TORCH_CHECK_VALUE), RuntimeError otherwise.
#pragma once

#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// PyTorch's torch.nn.functional.ScalingType. kiln computes TensorWise and RowWise.
enum class ScalingType { TensorWise, RowWise, BlockWise1x16, BlockWise1x32, BlockWise1x128, BlockWise128x128 };

// F.scaled_mm (2.15): output_dtype defaults to bfloat16. The swizzle, contraction_dim and
// use_fast_accum arguments are not taken (no swizzle on CPU; fast accumulation is ignored
// by PyTorch's CPU path).
Tensor scaled_mm(const Tensor& mat_a, const Tensor& mat_b, const Tensor& scale_a, ScalingType recipe_a,
                 const Tensor& scale_b, ScalingType recipe_b, const std::optional<Tensor>& bias = std::nullopt,
                 DType output_dtype = DType::BFloat16);

// torch._scaled_mm: the recipe is inferred from the scale shapes (numel 1 -> TensorWise,
// [M, 1] and [1, N] -> RowWise); out_dtype defaults to mat1's dtype. scale_result (a
// one-element float32 tensor) only matters for fp8 output: the float32 result is
// multiplied by 1 / scale_result before the cast, as PyTorch's CPU path does; other
// outputs ignore it.
Tensor _scaled_mm(const Tensor& mat1, const Tensor& mat2, const Tensor& scale_a, const Tensor& scale_b,
                  const std::optional<Tensor>& bias = std::nullopt,
                  const std::optional<Tensor>& scale_result = std::nullopt,
                  std::optional<DType> out_dtype = std::nullopt);

}  // namespace kiln
