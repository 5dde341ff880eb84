// PyTorch's type promotion (torch.promote_types, torch.result_type) and broadcasting.
#pragma once

#include <initializer_list>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln {

// torch.promote_types. Throws for fp8 mixed with another dtype and for uint16/32/64
// mixed with a non-floating dtype, as PyTorch does.
DType promote_types(DType a, DType b);

// One participant of an op: a tensor (0-dim tensors rank below dimensioned ones) or
// a wrapped number (a Python/C++ scalar, which only contributes its category).
struct PromotionOperand {
  PromotionOperand(const Tensor& t) : tensor(&t) {}
  PromotionOperand(const Scalar& s) : scalar(&s) {}
  const Tensor* tensor = nullptr;
  const Scalar* scalar = nullptr;
};

// torch.result_type over any mix of tensors and scalars.
DType result_type(std::initializer_list<PromotionOperand> operands);

// torch.broadcast_shapes; the error names `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast_shapes");
Shape broadcast_shapes(const std::vector<Shape>& shapes, const char* op = "broadcast_shapes");

}  // namespace kiln
