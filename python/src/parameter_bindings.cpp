// What kiln.nn.Parameter and Module.to need from the Tensor class: a constructor from a
// tensor (so Python can subclass Tensor) and PyTorch's `data` property, whose setter
// swaps the values a tensor object holds while keeping its identity and autograd state.
#include "bindings.h"
#include "kiln/dtype.h"

namespace kiln::python {

void bind_parameter_support(py::module_& m) {
  auto tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  // Tensor(t): another handle to t's tensor (same data, same autograd leaf). Subclasses
  // (kiln.nn.Parameter) pass t.detach() to get a new leaf that shares the data.
  tensor.def(py::init([](const Tensor& t) { return t; }), py::arg("data"));
  tensor.def_property(
      "data", [](const Tensor& t) { return t.detach(); },
      [](Tensor& t, const Tensor& src) {
        if (!src.defined()) throw py::type_error("data: assigned an undefined tensor");
        if (t.requires_grad() && !is_floating(src.dtype()) && !is_complex(src.dtype())) {
          throw py::type_error(std::string("data: a tensor that requires grad cannot hold ") +
                               std::string(dtype_name(src.dtype())) + " data (floating or complex only)");
        }
        // Same object, new values: parameters keep their identity (optimizers and
        // modules hold them by identity) as PyTorch's set_data does.
        TensorImpl& dst = *t.unsafe_impl();
        const TensorImpl& from = *src.unsafe_impl();
        dst.storage = from.storage;
        dst.sizes = from.sizes;
        dst.strides = from.strides;
        dst.offset = from.offset;
        dst.dtype = from.dtype;
      });
}

}  // namespace kiln::python
