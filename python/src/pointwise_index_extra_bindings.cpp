// frexp, heaviside, logspace, take, put_/put, bincount (kiln.<op> and Tensor.<op>) and
// kiln.special.laguerre_polynomial_l.
#include <pybind11/stl.h>

#include "binding_helpers.h"
#include "bindings.h"
#include "kiln/ops/index_extra.h"
#include "kiln/ops/pointwise_extra.h"

namespace kiln::python {

void bind_pointwise_index_extra(py::module_& m) {
  const py::object frexp_result =
      py::module_::import("collections").attr("namedtuple")("frexp", py::make_tuple("mantissa", "exponent"));
  m.attr("_frexp_result") = frexp_result;
  def_op(
      m, "frexp",
      [frexp_result](const Tensor& input) {
        FrexpResult r = frexp(input);
        return frexp_result(r.mantissa, r.exponent);
      },
      py::arg("input"));
  def_op(
      m, "heaviside",
      [](const Tensor& input, const py::object& values) {
        // PyTorch takes a tensor; a Python number becomes a 0-dim tensor of input's dtype.
        const Tensor v = is_tensor(values) ? values.cast<Tensor>()
                                           : scalar_tensor(to_scalar(values, "heaviside"), input.dtype());
        return heaviside(input, v);
      },
      py::arg("input"), py::arg("values"));
  m.def(
      "logspace",
      [](const py::object& start, const py::object& end, int64_t steps, double base, const py::object& dtype) {
        auto number = [](const py::object& v) { return is_tensor(v) ? v.cast<Tensor>().item() : to_scalar(v, "logspace"); };
        return logspace(number(start), number(end), steps, base, to_opt_dtype(dtype));
      },
      py::arg("start"), py::arg("end"), py::arg("steps"), py::arg("base") = 10.0, py::kw_only(),
      py::arg("dtype") = py::none());
  def_op(m, "take", &take, py::arg("input"), py::arg("index"));
  tensor_class(m).def("put_", &put_, py::arg("index"), py::arg("source"), py::arg("accumulate") = false);
  def_op(m, "put", &put, py::arg("input"), py::arg("index"), py::arg("source"), py::arg("accumulate") = false);
  def_op(
      m, "bincount",
      [](const Tensor& input, const std::optional<Tensor>& weights, int64_t minlength) {
        return bincount(input, weights, minlength);
      },
      py::arg("input"), py::arg("weights") = py::none(), py::arg("minlength") = 0);

  py::module_ special = m.def_submodule("special", "torch.special's functions");
  special.def(
      "laguerre_polynomial_l",
      [](const py::object& input, const py::object& n) {
        if (is_tensor(input) && is_tensor(n)) return special::laguerre_polynomial_l(input.cast<Tensor>(), n.cast<Tensor>());
        if (is_tensor(input)) return special::laguerre_polynomial_l(input.cast<Tensor>(), to_scalar(n, "laguerre_polynomial_l"));
        if (is_tensor(n)) return special::laguerre_polynomial_l(to_scalar(input, "laguerre_polynomial_l"), n.cast<Tensor>());
        throw py::type_error("laguerre_polynomial_l: expected a tensor for input or n, got two numbers");
      },
      py::arg("input"), py::arg("n"));
}

}  // namespace kiln::python
