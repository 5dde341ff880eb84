// torch.nn.functional.linear, and kiln's FP8 weight-only linear with its quantisation
// helpers.
//
// linear(input [..., K], weight [N, K], bias [N]?) -> [..., N], y = x W^T + b:
//   float32, float64, bfloat16, float16; input, weight and bias share one dtype (no
//   promotion, as PyTorch: "mat1 and mat2 must have the same dtype"). Narrow dtypes
//   accumulate in float32 and round once. One input row ([K], [1, K], [1, 1, K], ...) runs
//   a memory-bandwidth GEMV kernel with the bias added in the kernel; more rows run
//   OpenBLAS sgemm/dgemm (bf16/f16 widened to f32 panel by panel). Any input layout (a
//   non-contiguous one is copied); a weight with unit stride inside rows is read in
//   place whatever its row stride. K = 0 gives the bias (or zeros); M = 0 or N = 0 give
//   empty results.
//   Beyond PyTorch: none. Narrower than PyTorch: the weight must be 2-D, the bias [N], [1]
//   or 0-dim (PyTorch also takes a 1-D weight and any bias broadcastable to the output).
//
// linear_fp8(input [..., K], weight float8_e4m3fn [N, K], scale float32, bias?) -> [..., N]
//   weight-only FP8: y = sum_k x[k] * (W[n, k] * s) + b with the scale s either
//     [N]                               one per output row, or
//     [ceil(N/128), ceil(K/128)]        one per 128x128 block (Hugging Face
//                                       "weight_scale_inv": w_real = w_fp8 * scale).
//   input float32, bfloat16 or float16; bias and result have the input's dtype;
//   accumulation in float32 with the scales applied outside the inner products. The FP8
//   weight codes 0x7F/0xFF (NaN) are read as ±480, not NaN: they never occur in a
//   quantised weight (quantisation saturates to ±448 and refuses non-finite input).
//   FP8 checkpoints ship bf16/f16 scales too: convert them with .to(float32) first.
#pragma once

#include <optional>
#include <utility>

#include "kiln/scalar_types.h"  // kFp8ScaleBlock
#include "kiln/tensor.h"

namespace kiln {

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);

Tensor linear_fp8(const Tensor& input, const Tensor& weight, const Tensor& scale,
                  const std::optional<Tensor>& bias = std::nullopt);

// Row-wise quantisation of a float32 / bfloat16 / float16 weight [N, K]:
// scale[n] = max_k |w[n, k]| / 448 (1 for an all-zero row), weight_fp8 = e4m3fn(w / scale)
// (round to nearest even). Returns {weight_fp8 [N, K], scale float32 [N]}. Inf or NaN in
// the weight is a Value error.
std::pair<Tensor, Tensor> quantize_fp8_rowwise(const Tensor& weight);
// The same quantisation plus the error it made, from the same pass: per row
// sum_k (dequantised - w)^2 and sum_k w^2 as float64 [N] tensors (the FP8 error report of
// loading a model with --dtype fp8).
struct Fp8RowwiseQuantization {
  Tensor weight;         // float8_e4m3fn [N, K]
  Tensor scale;          // float32 [N]
  Tensor squared_error;  // float64 [N]
  Tensor squared_norm;   // float64 [N]
};
Fp8RowwiseQuantization quantize_fp8_rowwise_with_error(const Tensor& weight);

// w_real = float(weight_fp8) * scale for either scale layout, as `dtype` (float32,
// bfloat16 or float16; float32 by default). An exact cast: NaN codes stay NaN.
Tensor dequantize_fp8(const Tensor& weight, const Tensor& scale, DType dtype = DType::Float32);

}  // namespace kiln
