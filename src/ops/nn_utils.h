// Helpers shared by the nn op front ends (softmax, norms, rope, fused activations).
#pragma once

#include <string_view>

#include "kiln/dtype.h"

namespace kiln {

// The float dtypes the nn kernels take: float32, float64, float16, bfloat16.
inline bool is_nn_float(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

}  // namespace kiln
