// The in-place unary ops and clamp_ as Tensor methods (Tensor.exp_, relu_, clamp_, ...)
// and kiln.<op>_ functions (kiln.relu_), as in PyTorch.
#include "binding_helpers.h"
#include "bindings.h"
#include "kiln/ops/elementwise_inplace.h"

namespace kiln::python {

void bind_inplace(py::module_& m) {
  using InPlace = Tensor& (*)(Tensor&);
  const std::pair<const char*, InPlace> unary[] = {
      {"abs_", &abs_},     {"neg_", &neg_},       {"square_", &square_},         {"exp_", &exp_},
      {"expm1_", &expm1_}, {"log_", &log_},       {"log1p_", &log1p_},           {"sqrt_", &sqrt_},
      {"rsqrt_", &rsqrt_}, {"reciprocal_", &reciprocal_}, {"sin_", &sin_},       {"cos_", &cos_},
      {"tanh_", &tanh_},   {"sigmoid_", &sigmoid_}, {"relu_", &relu_},          {"silu_", &silu_}};
  for (const auto& [name, fn] : unary) {
    // Returns self (the same Python object, as PyTorch's in-place methods do).
    tensor_class(m).def(name, [fn](py::object self) {
      fn(self.cast<Tensor&>());
      return self;
    });
  }
  m.def("relu_", [](py::object self) {
    relu_(self.cast<Tensor&>());
    return self;
  });
  const auto clamp_method = [](py::object self, const py::object& lo, const py::object& hi) {
    Tensor& x = self.cast<Tensor&>();
    if (is_tensor(lo) || is_tensor(hi)) {
      auto opt = [&x](const py::object& o) -> std::optional<Tensor> {
        if (o.is_none()) return std::nullopt;
        if (is_tensor(o)) return o.cast<Tensor>();
        return wrap_number(o, x, "clamp_");
      };
      clamp_(x, opt(lo), opt(hi));
    } else {
      auto opt = [](const py::object& o) -> std::optional<Scalar> {
        if (o.is_none()) return std::nullopt;
        return to_scalar(o, "clamp_");
      };
      clamp_(x, opt(lo), opt(hi));
    }
    return self;
  };
  tensor_class(m).def("clamp_", clamp_method, py::arg("min") = py::none(), py::arg("max") = py::none());
  tensor_class(m).def("clip_", clamp_method, py::arg("min") = py::none(), py::arg("max") = py::none());
  tensor_class(m).def("clamp_min_", [](py::object self, const py::object& lo) {
    clamp_min_(self.cast<Tensor&>(), to_scalar(lo, "clamp_min_"));
    return self;
  });
  tensor_class(m).def("clamp_max_", [](py::object self, const py::object& hi) {
    clamp_max_(self.cast<Tensor&>(), to_scalar(hi, "clamp_max_"));
    return self;
  });
}

}  // namespace kiln::python
