// The checks every `_out` op (kiln/ops/out_variants.h) makes of the tensor it writes
// (internal).
#pragma once

#include <initializer_list>

#include "kiln/tensor.h"

namespace kiln::out_detail {

// `out` is defined, has `shape` and `dtype`, is contiguous, on `device`, and shares no
// memory with any of `inputs` (null entries skipped); and no input requires grad while
// grad mode is on (out= is not differentiable). PyTorch's wording where it has one.
void check_out(const char* op, const Tensor& out, const Shape& shape, DType dtype, Device device,
               std::initializer_list<const Tensor*> inputs);

}  // namespace kiln::out_detail
