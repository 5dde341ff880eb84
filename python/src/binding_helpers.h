// Helpers shared by the op binding files: Python-number/tensor argument handling and
// defining an op both as kiln.<name> and as the method Tensor.<name>.
#pragma once

#include <pybind11/stl.h>

#include <utility>

#include "bindings.h"
#include "kiln/ops/creation.h"
#include "kiln/type_promotion.h"
#include "kiln/dtype.h"

namespace kiln::python {

inline bool is_tensor(const py::handle& h) { return py::isinstance<Tensor>(h); }

// A Python number turned into a 0-dim tensor that promotes with `other` exactly as the
// number would (held in the compute dtype so no precision is lost on the way).
inline Tensor wrap_number(const py::handle& number, const Tensor& other, std::string_view op = {}) {
  Scalar s = to_scalar(number, op);
  return scalar_tensor(s, compute_dtype(result_type({other, s})));
}

// The dividend of a true division number / tensor: held in the dtype the division
// computes in (float32 for integer operands), so -7 / uint8_tensor divides -7, not the
// uint8 value -7 would wrap to.
inline Tensor wrap_dividend(const py::handle& number, const Tensor& other, std::string_view op = {}) {
  Scalar s = to_scalar(number, op);
  return scalar_tensor(s, compute_dtype(float_result_dtype(result_type({other, s}))));
}

// dim=None, an int, or a sequence of ints.
inline std::vector<int64_t> to_dims(const py::object& dim, std::string_view op = {}) {
  if (dim.is_none()) return {};
  return to_shape(dim, op, "dim");
}

inline std::optional<DType> to_opt_dtype(const py::object& dtype) {
  if (dtype.is_none()) return std::nullopt;
  return to_dtype(dtype);
}

// The Tensor class object, to add methods from any binding file.
inline py::class_<Tensor> tensor_class(py::module_& m) {
  return py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
}

// kiln.<name>(input, ...) and input.<name>(...) share one callable. With argument
// annotations, the first one names `input`, which the method form takes as self.
template <typename F>
void def_op(py::module_& m, const char* name, F&& f) {
  m.def(name, f);
  tensor_class(m).def(name, std::forward<F>(f));
}
template <typename F, typename... Extra>
void def_op(py::module_& m, const char* name, F&& f, const py::arg& self_arg, const Extra&... extra) {
  m.def(name, f, self_arg, extra...);
  tensor_class(m).def(name, std::forward<F>(f), extra...);
}

}  // namespace kiln::python
