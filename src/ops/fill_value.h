// The checked conversion of a fill value (masked_fill, index_put_ with a number), shared
// by the index family's front ends (index_ops.cpp, advanced_index.cpp).
#pragma once

#include "kiln/dtype.h"
#include "kiln/scalar.h"

namespace kiln {

// PyTorch's checked conversion (core/scalar_convert.h): a RuntimeError "value cannot be
// converted to type uint8 without overflow (got 300; ...)" when `value` does not fit `dt`.
void check_fill_value(const Scalar& value, DType dt, const char* op);

}  // namespace kiln
