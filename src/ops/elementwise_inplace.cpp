// The in-place unary ops and clamp_ (kiln/ops/elementwise_inplace.h): the out-of-place
// op, then a write back into self. Not on the decode hot path; the temporary keeps
// every kernel single-purpose.
#include "kiln/ops/elementwise_inplace.h"

#include "core/autograd_meta.h"
#include "kiln/error.h"
#include "kiln/ops/elementwise.h"
#include "ops/elementwise_common.h"
#include "ops/op_utils.h"

namespace kiln {

namespace ew = elementwise;

namespace {

// Writes op(self) into self. The cast rule is PyTorch's for in-place results.
template <typename Op>
Tensor& write_back(Tensor& self, const char* name, Op op) {
  check_defined(self, name, "self");
  KILN_INPLACE_AUTOGRAD(name, self, nullptr, [&] { write_back(self, name, op); }, op);
  Tensor result = op(self);
  if (!ew::can_cast(result.dtype(), self.dtype())) {
    fail(ErrorKind::Runtime, name, "result type {} can't be cast to the desired output type {}",
         torch_type_name(result.dtype()), torch_type_name(self.dtype()));
  }
  self.copy_(result);
  return self;
}

}  // namespace

Tensor& abs_(Tensor& self) {
  KILN_CHECK(!is_complex(self.dtype()), "abs_", "In-place abs is not supported for complex tensors.");
  return write_back(self, "abs_", [](const Tensor& s) { return abs(s); });
}
Tensor& neg_(Tensor& self) { return write_back(self, "neg_", [](const Tensor& s) { return neg(s); }); }
Tensor& square_(Tensor& self) { return write_back(self, "square_", [](const Tensor& s) { return square(s); }); }
Tensor& exp_(Tensor& self) { return write_back(self, "exp_", [](const Tensor& s) { return exp(s); }); }
Tensor& expm1_(Tensor& self) { return write_back(self, "expm1_", [](const Tensor& s) { return expm1(s); }); }
Tensor& log_(Tensor& self) { return write_back(self, "log_", [](const Tensor& s) { return log(s); }); }
Tensor& log1p_(Tensor& self) { return write_back(self, "log1p_", [](const Tensor& s) { return log1p(s); }); }
Tensor& sqrt_(Tensor& self) { return write_back(self, "sqrt_", [](const Tensor& s) { return sqrt(s); }); }
Tensor& rsqrt_(Tensor& self) { return write_back(self, "rsqrt_", [](const Tensor& s) { return rsqrt(s); }); }
Tensor& reciprocal_(Tensor& self) {
  return write_back(self, "reciprocal_", [](const Tensor& s) { return reciprocal(s); });
}
Tensor& sin_(Tensor& self) { return write_back(self, "sin_", [](const Tensor& s) { return sin(s); }); }
Tensor& cos_(Tensor& self) { return write_back(self, "cos_", [](const Tensor& s) { return cos(s); }); }
Tensor& tanh_(Tensor& self) { return write_back(self, "tanh_", [](const Tensor& s) { return tanh(s); }); }
Tensor& sigmoid_(Tensor& self) { return write_back(self, "sigmoid_", [](const Tensor& s) { return sigmoid(s); }); }
Tensor& relu_(Tensor& self) { return write_back(self, "relu_", [](const Tensor& s) { return relu(s); }); }
Tensor& silu_(Tensor& self) { return write_back(self, "silu_", [](const Tensor& s) { return silu(s); }); }

Tensor& clamp_(Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  return write_back(self, "clamp_", [&](const Tensor& s) { return clamp(s, min, max); });
}
Tensor& clamp_(Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  check_defined(self, "clamp_", "self");
  // The bounds may require grad too: they are the in-place op's sources.
  const Tensor* source = min.has_value() && min->requires_grad() ? &*min : (max.has_value() ? &*max : nullptr);
  KILN_INPLACE_AUTOGRAD(
      "clamp_", self, source, [&] { clamp_(self, min, max); }, [&](const Tensor& s) { return clamp(s, min, max); });
  Tensor result = clamp(self, min, max);
  KILN_CHECK(result.sizes() == self.sizes(), "clamp_", "output with shape {} doesn't match the broadcast shape {}",
             self.shape_str(), result.shape_str());
  if (!ew::can_cast(result.dtype(), self.dtype())) {
    fail(ErrorKind::Runtime, "clamp_", "result type {} can't be cast to the desired output type {}",
         torch_type_name(result.dtype()), torch_type_name(self.dtype()));
  }
  self.copy_(result);
  return self;
}
Tensor& clamp_min_(Tensor& self, const Scalar& min) {
  return write_back(self, "clamp_min_", [&](const Tensor& s) { return clamp_min(s, min); });
}
Tensor& clamp_max_(Tensor& self, const Scalar& max) {
  return write_back(self, "clamp_max_", [&](const Tensor& s) { return clamp_max(s, max); });
}

}  // namespace kiln
