// Autograd in Python: Tensor.requires_grad / grad / grad_fn / backward / detach, and the
// kiln._kiln._autograd functions that python/kiln/autograd.py wraps (grad, backward,
// grad mode, gradcheck).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "kiln/autograd.h"
#include "kiln/error.h"
#include "kiln/grad_mode.h"

namespace kiln::python {
namespace {

namespace ag = kiln::autograd;

std::vector<Tensor> tensor_list(const py::handle& obj) {
  if (obj.is_none()) return {};
  if (py::isinstance<Tensor>(obj)) return {obj.cast<Tensor>()};
  std::vector<Tensor> out;
  for (const py::handle& item : obj) out.push_back(item.is_none() ? Tensor() : item.cast<Tensor>());
  return out;
}

py::object optional_tensor(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

// A Python callable f(*inputs) -> Tensor or sequence of Tensors, as an ag::Function.
ag::Function wrap_function(const py::function& fn) {
  return [fn](const std::vector<Tensor>& xs) {
    py::tuple args(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) args[i] = py::cast(xs[i]);
    py::object result = fn(*args);
    return tensor_list(result);
  };
}

ag::GradcheckOptions options(double eps, double atol, double rtol) {
  ag::GradcheckOptions o;
  o.eps = eps;
  o.atol = atol;
  o.rtol = rtol;
  return o;
}

}  // namespace

void bind_autograd(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  tensor
      .def_property(
          "requires_grad", &Tensor::requires_grad,
          [](Tensor& t, bool value) { t.requires_grad_(value); })
      .def("requires_grad_", [](Tensor& t, bool value) { return t.requires_grad_(value); },
           py::arg("requires_grad") = true)
      .def_property(
          "grad", [](const Tensor& t) { return optional_tensor(t.grad()); },
          [](Tensor& t, const py::object& g) { t.set_grad(g.is_none() ? Tensor() : g.cast<Tensor>()); })
      .def_property_readonly("grad_fn", [](const Tensor& t) -> py::object {
        auto fn = ag::grad_fn(t);
        return fn ? py::cast(fn) : py::none();
      })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property_readonly("_version", &Tensor::version)
      .def("detach", &Tensor::detach)
      .def("detach_", [](Tensor& t) { return t.detach_(); })
      .def(
          "backward",
          [](const Tensor& t, const py::object& gradient, std::optional<bool> retain_graph, bool create_graph,
             const py::object& inputs) {
            ag::backward({t}, gradient.is_none() ? std::vector<Tensor>{} : std::vector<Tensor>{gradient.cast<Tensor>()},
                         retain_graph, create_graph, tensor_list(inputs));
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(), py::arg("create_graph") = false,
          py::arg("inputs") = py::none());

  py::module_ sub = m.def_submodule("_autograd", "autograd engine (wrapped by kiln.autograd)");
  py::class_<ag::Node, std::shared_ptr<ag::Node>>(sub, "Node")
      .def("name", &ag::Node::name)
      .def_property_readonly("next_functions",
                             [](const ag::Node& n) {
                               py::list out;
                               for (const ag::Edge& e : n.next_edges()) {
                                 out.append(py::make_tuple(e.function ? py::cast(e.function) : py::none(),
                                                           e.input_nr));
                               }
                               return py::tuple(out);
                             })
      .def("__repr__", [](const ag::Node& n) { return "<" + n.name() + ">"; });
  sub.def("is_grad_enabled", &GradMode::is_enabled);
  sub.def("set_grad_enabled", &GradMode::set_enabled, py::arg("mode"));
  sub.def(
      "backward",
      [](const py::object& tensors, const py::object& grad_tensors, std::optional<bool> retain_graph,
         bool create_graph, const py::object& inputs) {
        ag::backward(tensor_list(tensors), tensor_list(grad_tensors), retain_graph, create_graph, tensor_list(inputs));
      },
      py::arg("tensors"), py::arg("grad_tensors") = py::none(), py::arg("retain_graph") = py::none(),
      py::arg("create_graph") = false, py::arg("inputs") = py::none());
  sub.def(
      "grad",
      [](const py::object& outputs, const py::object& inputs, const py::object& grad_outputs,
         std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
        const std::vector<Tensor> g = ag::grad(tensor_list(outputs), tensor_list(inputs), tensor_list(grad_outputs),
                                               retain_graph, create_graph, allow_unused);
        py::tuple out(g.size());
        for (size_t i = 0; i < g.size(); ++i) out[i] = optional_tensor(g[i]);
        return out;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs") = py::none(),
      py::arg("retain_graph") = py::none(), py::arg("create_graph") = false, py::arg("allow_unused") = false);
  sub.def(
      "gradcheck",
      [](const py::function& fn, const py::object& inputs, double eps, double atol, double rtol) {
        return ag::gradcheck_mismatch(wrap_function(fn), tensor_list(inputs), options(eps, atol, rtol));
      },
      py::arg("func"), py::arg("inputs"), py::arg("eps"), py::arg("atol"), py::arg("rtol"));
  sub.def(
      "gradgradcheck",
      [](const py::function& fn, const py::object& inputs, double eps, double atol, double rtol, uint64_t seed) {
        return ag::gradgradcheck_mismatch(wrap_function(fn), tensor_list(inputs), options(eps, atol, rtol), seed);
      },
      py::arg("func"), py::arg("inputs"), py::arg("eps"), py::arg("atol"), py::arg("rtol"), py::arg("seed") = 0);
  sub.def("conj", &ag::conj);
}

}  // namespace kiln::python
