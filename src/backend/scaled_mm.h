// The scaled_mm family of the kernel table: an fp8 product with float32 scales, a bias and
// an output cast (front end: src/ops/scaled_mm.cpp).
#pragma once

#include <optional>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/tensor.h"

namespace kiln::backend {

// out = ((a @ b) * scales + bias) * output_multiplier, cast to out's dtype. The scales
// multiply C's rows and columns after the product (the same as scaling a's rows and b's
// columns before it, up to float32 rounding).
struct ScaledMmProblem {
  Tensor a;  // [M, K] float8_e4m3fn or float8_e5m2, any strides
  Tensor b;  // [K, N] float8, any strides
  // float32: one value each (tensor-wise), or scale_a [M, 1] and scale_b [1, N] (row-wise).
  Tensor scale_a, scale_b;
  bool rowwise = false;
  std::optional<Tensor> bias;      // N values, float32 / bfloat16 / float16
  float output_multiplier = 1.0f;  // 1 / scale_result for an fp8 output, else 1
  Tensor out;                      // contiguous [M, N], M and N > 0
};

struct ScaledMmKernels {
  void (*scaled_mm)(const ExecutionContext& ctx, const ScaledMmProblem& p) = nullptr;
};

inline KernelTable<ScaledMmKernels> scaled_mm_kernels{"scaled_mm"};

}  // namespace kiln::backend
