// In-place forms of the unary ops and of clamp (PyTorch's exp_, relu_, clamp_, ...).
// Each computes its out-of-place op and writes the result back into self (cast to
// self's dtype as PyTorch's in-place ops do; a result dtype self cannot hold, such as a
// float result for an integer self, is an error). Under autograd they are recorded
// like the out-of-place op (docs/autograd.md, "In-place ops").
#pragma once

#include <optional>

#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln {

Tensor& abs_(Tensor& self);
Tensor& neg_(Tensor& self);
Tensor& square_(Tensor& self);
Tensor& exp_(Tensor& self);
Tensor& expm1_(Tensor& self);
Tensor& log_(Tensor& self);
Tensor& log1p_(Tensor& self);
Tensor& sqrt_(Tensor& self);
Tensor& rsqrt_(Tensor& self);
Tensor& reciprocal_(Tensor& self);
Tensor& sin_(Tensor& self);
Tensor& cos_(Tensor& self);
Tensor& tanh_(Tensor& self);
Tensor& sigmoid_(Tensor& self);
Tensor& relu_(Tensor& self);
Tensor& silu_(Tensor& self);
Tensor& clamp_(Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max);
Tensor& clamp_(Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max);
Tensor& clamp_min_(Tensor& self, const Scalar& min);
Tensor& clamp_max_(Tensor& self, const Scalar& max);

}  // namespace kiln
