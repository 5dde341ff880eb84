// The `_kiln` extension module. Thin: argument conversion and error mapping only.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "kiln/error.h"

namespace kiln::python {

Scalar to_scalar(const py::handle& obj) {
  // bool first: Python's bool is a subclass of int.
  if (py::isinstance<py::bool_>(obj)) return Scalar(obj.cast<bool>());
  if (py::isinstance<py::int_>(obj)) {
    try {
      return Scalar(obj.cast<int64_t>());
    } catch (const py::cast_error&) {
      return Scalar(obj.cast<uint64_t>());
    }
  }
  if (py::isinstance<py::float_>(obj)) return Scalar(obj.cast<double>());
  if (PyComplex_Check(obj.ptr())) return Scalar(obj.cast<std::complex<double>>());
  // numpy scalars and other objects with __index__/__float__.
  if (PyIndex_Check(obj.ptr())) return Scalar(py::int_(py::reinterpret_borrow<py::object>(obj)).cast<int64_t>());
  if (PyFloat_Check(obj.ptr()) || py::hasattr(obj, "__float__")) {
    return Scalar(py::float_(py::reinterpret_borrow<py::object>(obj)).cast<double>());
  }
  throw py::type_error("expected a number (bool, int, float or complex), got " +
                       std::string(py::str(obj.get_type().attr("__name__"))));
}

bool is_python_number(const py::handle& obj) {
  return py::isinstance<py::bool_>(obj) || py::isinstance<py::int_>(obj) || py::isinstance<py::float_>(obj) ||
         PyComplex_Check(obj.ptr());
}

Shape to_shape(const py::handle& obj) {
  if (PyIndex_Check(obj.ptr())) return Shape{py::int_(py::reinterpret_borrow<py::object>(obj)).cast<int64_t>()};
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj)) {
    throw py::type_error("expected a shape (an int or a sequence of ints), got " +
                         std::string(py::str(obj.get_type().attr("__name__"))));
  }
  Shape s;
  for (auto item : py::reinterpret_borrow<py::sequence>(obj)) {
    if (!PyIndex_Check(item.ptr())) {
      throw py::type_error("shape entries must be ints, got " + std::string(py::str(item.get_type().attr("__name__"))));
    }
    s.push_back(py::int_(py::reinterpret_borrow<py::object>(item)).cast<int64_t>());
  }
  return s;
}

DType to_dtype(const py::handle& obj) {
  if (!py::isinstance<DType>(obj)) {
    throw py::type_error("dtype must be a kiln.dtype such as kiln.float32, got " +
                         std::string(py::str(obj.get_type().attr("__name__"))));
  }
  return obj.cast<DType>();
}

py::object from_scalar(const Scalar& s) {
  switch (s.tag()) {
    case Scalar::Tag::Bool: return py::bool_(s.to_bool());
    case Scalar::Tag::Int: return py::int_(s.to_int64());
    case Scalar::Tag::UInt: return py::int_(s.to_uint64());
    case Scalar::Tag::Double: return py::float_(s.to_double());
    case Scalar::Tag::Complex: return py::cast(s.to_complex());
  }
  return py::none();
}

}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  using namespace kiln::python;
  m.doc() = "kiln: a C++ tensor runtime with PyTorch semantics";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kiln::Error& e) {
      // The exception PyTorch raises for the same mistake.
      switch (e.kind()) {
        case kiln::ErrorKind::Index: PyErr_SetString(PyExc_IndexError, e.what()); break;
        case kiln::ErrorKind::Type: PyErr_SetString(PyExc_TypeError, e.what()); break;
        case kiln::ErrorKind::Value: PyErr_SetString(PyExc_ValueError, e.what()); break;
        case kiln::ErrorKind::NotImplemented: PyErr_SetString(PyExc_NotImplementedError, e.what()); break;
        case kiln::ErrorKind::Runtime: PyErr_SetString(PyExc_RuntimeError, e.what()); break;
      }
    }
  });
  bind_dtypes(m);
  bind_tensor(m);
  bind_creation(m);
  bind_runtime(m);
  bind_ops(m);
  bind_llm(m);
  bind_composite(m);
}
