// The checked conversion of a fill value (masked_fill, index_put_ with a number), shared
// by the index family's front ends (index_ops.cpp, advanced_index.cpp).
#pragma once

#include "kiln/dtype.h"
#include "kiln/scalar.h"

namespace kiln {

// PyTorch's checked conversion: a Runtime error "value cannot be converted to type uint8
// without overflow (got 300)" when `value` does not fit integer dtype `dt` (NaN and
// infinities never fit), or has an imaginary part for a real dtype.
void check_fill_value(const Scalar& value, DType dt, const char* op);

}  // namespace kiln
