// What the composites share (internal): the dtype they compute in and FP8 weights
// dequantised with simple ops. Only public kiln headers here, as in every composite.
#pragma once

#include <optional>

#include "kiln/tensor.h"

namespace kiln::composite::detail {

// The dtype a fused op computes in for a float operand: float64 stays float64; float32,
// float16 and bfloat16 compute in float32. Any other dtype is a Type error, as in the
// fused op.
DType compute_dtype_of(const Tensor& t, const char* op, const char* name);

// float64 when either is, else float32: an op with a float64 operand computes in it.
DType wider(DType a, DType b);

// w_real = float32(w) * scale for a weight [rows, cols]: float32 weights pass through
// (times nothing); float8_e4m3fn ones take float32 scales per row [rows] or per 128x128
// block [ceil(rows/128), ceil(cols/128)] (Hugging Face's `weight_scale_inv`).
Tensor dequantized(const Tensor& weight, const std::optional<Tensor>& scale, const char* op);

}  // namespace kiln::composite::detail
