// PyTorch's checked conversion of a number to a dtype (c10::checked_convert), shared by
// every op that writes one given number into a tensor: fill_, full, scalar_tensor,
// masked_fill, index_put_, and the integer checks of scalar operands.
#pragma once

#include "kiln/dtype.h"
#include "kiln/scalar.h"

namespace kiln {

// Whether `value` converts to `dt` without overflow, by c10::overflows' rules:
//   - bool takes every value (nonzero, NaN included, is true);
//   - an integer dtype takes integers in its range, and an unsigned one also takes
//     negative integers down to -max, which wrap (uint8 takes -255..255, as in PyTorch);
//     a float value must lie in [lowest, max] (so NaN, infinities and, for unsigned
//     dtypes, any negative float do not fit) and is then truncated;
//   - a floating dtype takes NaN, an infinity when it has one (float8_e4m3fn has none),
//     and finite values up to its largest finite magnitude (65504 for float16), so
//     1e39 does not fit float32;
//   - a complex value with a nonzero imaginary part fits no real dtype; each part of it
//     must fit the dtype's real counterpart.
bool scalar_fits(const Scalar& value, DType dt);

// Raises PyTorch's RuntimeError "value cannot be converted to type uint8 without
// overflow" (with the value and the range) unless scalar_fits(value, dt).
void check_scalar_converts(const Scalar& value, DType dt, const char* op);

}  // namespace kiln
