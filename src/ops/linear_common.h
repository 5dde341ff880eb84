// Validation and the kernel call shared by linear (linear.cpp) and linear_fp8
// (linear_fp8.cpp) (internal).
#pragma once

#include <optional>

#include "backend/linear.h"
#include "kiln/tensor.h"

namespace kiln::linear_detail {

// The input flattened to a contiguous [M, K] matrix and the result's shape [..., N].
struct LinearGeometry {
  Tensor x;
  int64_t M = 0;
  int64_t K = 0;
  int64_t N = 0;
  Shape out_shape;
};

// Checks input (at least 1-D) against a 2-D weight [N, K] with PyTorch's messages.
LinearGeometry linear_geometry(const char* op, const Tensor& input, const Tensor& weight);

// The weight's rows as the kernels read them: in place when the inner stride is 1 (or
// K <= 1), else a contiguous copy. `keep` holds the tensor the pointer belongs to.
backend::LinearWeight weight_rows(const Tensor& weight, Tensor& keep);

// Checks the bias (dtype `dtype`; shape [N], [1] or 0-dim) and returns it contiguous.
std::optional<Tensor> checked_bias(const char* op, const std::optional<Tensor>& bias, DType dtype, int64_t N);

// Allocates and computes the result: K = 0 -> bias or zeros; else the linear kernel of
// the input's device.
Tensor run_linear(const char* op, const LinearGeometry& g, const backend::LinearWeight& w,
                  const std::optional<Tensor>& bias);
// The same into `out`, already checked to have g.out_shape, the input's dtype and device.
void run_linear_into(const char* op, const LinearGeometry& g, const backend::LinearWeight& w,
                     const std::optional<Tensor>& bias, const Tensor& out);

}  // namespace kiln::linear_detail
