// frexp, heaviside, logspace and special.laguerre_polynomial_l, with PyTorch's
// semantics (docs/ops.md).
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln {

struct FrexpResult {
  Tensor mantissa, exponent;
};

// input = mantissa * 2^exponent; mantissa in input's dtype with |m| in [0.5, 1) for
// finite non-zero input (sign of zero kept, subnormals exact), exponent int32; inf and
// NaN give themselves and exponent 0 (C's frexp on glibc). Floating dtypes only.
FrexpResult frexp(const Tensor& input);

// 0 where input < 0, values where input == 0 (-0.0 included), 1 where input > 0, and 0
// for NaN input. input and values broadcast and must share one non-complex dtype.
Tensor heaviside(const Tensor& input, const Tensor& values);

// base ** linspace(start, end, steps), computed in float64 and converted to dtype
// (float32 by default; integer dtypes truncate, as PyTorch on CPU). Real start/end only.
Tensor logspace(const Scalar& start, const Scalar& end, int64_t steps, double base = 10.0,
                std::optional<DType> dtype = std::nullopt);

namespace special {
// Laguerre polynomial L_n(x), n truncated to an integer (PyTorch's recurrence); x and n
// broadcast; integer inputs promote to float32; float32/float64 results.
Tensor laguerre_polynomial_l(const Tensor& x, const Tensor& n);
Tensor laguerre_polynomial_l(const Tensor& x, const Scalar& n);
Tensor laguerre_polynomial_l(const Scalar& x, const Tensor& n);
}  // namespace special

}  // namespace kiln
