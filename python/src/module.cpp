// The `_kiln` extension module. Thin: argument conversion only (errors.cpp maps errors).
#include <pybind11/pybind11.h>

#include <complex>
#include <limits>
#include <string>

#include <fmt/core.h>

#include "bindings.h"
#include "kiln/error.h"

namespace kiln::python {

// Python refuses int -> str past 4300 digits.
std::string describe_int(const py::handle& obj) {
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!index) throw py::error_already_set();
  const int64_t bits = index.attr("bit_length")().cast<int64_t>();
  if (bits > 256) return fmt::format("(an int of {} bits)", bits);
  return py::str(index).cast<std::string>();
}

namespace {

[[noreturn]] void fail_out_of_range(const py::handle& index, std::string_view op, std::string_view what,
                                    std::string_view range) {
  const std::string message = fmt::format("{} {} is out of range for {}", what, describe_int(index), range);
  throw Error(ErrorKind::Runtime, op.empty() ? message : fmt::format("{}: {}", op, message));
}

// obj through __index__ (ints, bools, numpy ints): a new reference, or the Python error.
py::object as_index(const py::handle& obj) {
  PyObject* index = PyNumber_Index(obj.ptr());
  if (index == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(index);
}

// Sets *overflow to -1 / +1 (and returns 0) when index lies below / above int64.
int64_t int64_or_overflow(const py::handle& index, int* overflow) {
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<int64_t>(v);
}

}  // namespace

void throw_if_int_overflow(py::handle src, bool is_unsigned) {
  if (!src || PyFloat_Check(src.ptr()) || !PyIndex_Check(src.ptr())) return;
  PyObject* index = PyNumber_Index(src.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    return;
  }
  const py::object value = py::reinterpret_steal<py::object>(index);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return;
  }
  if (is_unsigned) {
    if (overflow == 0 && v >= 0) return;  // fits; refused for another reason
    if (overflow > 0) {
      PyLong_AsUnsignedLongLong(value.ptr());
      if (!PyErr_Occurred()) return;
      PyErr_Clear();
    }
    fail_out_of_range(value, {}, "Overflow when unpacking long: the int argument",
                      "uint64 (expected 0 to 2**64 - 1)");
  }
  if (overflow == 0) return;
  fail_out_of_range(value, {}, "Overflow when unpacking long: the int argument", "int64 (expected -2**63 to 2**63 - 1)");
}

int64_t to_int64(const py::handle& obj, std::string_view op, std::string_view what) {
  const py::object index = as_index(obj);
  int overflow = 0;
  const int64_t v = int64_or_overflow(index, &overflow);
  if (overflow != 0) fail_out_of_range(index, op, what, "int64 (expected -2**63 to 2**63 - 1)");
  return v;
}

double to_double(const py::handle& obj, std::string_view op, std::string_view what) {
  const double v = PyFloat_AsDouble(obj.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError) && PyIndex_Check(obj.ptr())) {
      PyErr_Clear();
      fail_out_of_range(obj, op, what, "float64");
    }
    throw py::error_already_set();  // not a number: Python's own TypeError
  }
  return v;
}

int64_t to_int64_clamped(const py::handle& obj) {
  const py::object index = as_index(obj);
  int overflow = 0;
  const int64_t v = int64_or_overflow(index, &overflow);
  if (overflow != 0) return overflow < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  return v;
}

Scalar to_scalar(const py::handle& obj, std::string_view op) {
  // bool first: Python's bool is a subclass of int.
  if (py::isinstance<py::bool_>(obj)) return Scalar(obj.cast<bool>());
  // ints and numpy scalars and other objects with __index__: int64, else uint64 (as
  // PyTorch, for values in [2**63, 2**64)).
  if (py::isinstance<py::int_>(obj) || PyIndex_Check(obj.ptr())) {
    const py::object index = as_index(obj);
    int overflow = 0;
    const int64_t v = int64_or_overflow(index, &overflow);
    if (overflow == 0) return Scalar(v);
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(index.ptr());
      if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) return Scalar(static_cast<uint64_t>(u));
      PyErr_Clear();
    }
    fail_out_of_range(index, op, "value", "int64 and uint64 (expected -2**63 to 2**64 - 1)");
  }
  if (py::isinstance<py::float_>(obj)) return Scalar(obj.cast<double>());
  // Python's C API directly: pybind11 casts std::complex only where pybind11/complex.h
  // is included, and elsewhere says "Unable to cast" (x * 1j, kiln.full(..., 1j)).
  if (PyComplex_Check(obj.ptr())) {
    const Py_complex c = PyComplex_AsCComplex(obj.ptr());
    if (c.real == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    return Scalar(std::complex<double>(c.real, c.imag));
  }
  if (py::hasattr(obj, "__float__")) return Scalar(py::float_(py::reinterpret_borrow<py::object>(obj)).cast<double>());
  throw py::type_error("expected a number (bool, int, float or complex), got " +
                       std::string(py::str(obj.get_type().attr("__name__"))));
}

bool is_python_number(const py::handle& obj) {
  return py::isinstance<py::bool_>(obj) || py::isinstance<py::int_>(obj) || py::isinstance<py::float_>(obj) ||
         PyComplex_Check(obj.ptr());
}

Shape to_shape(const py::handle& obj, std::string_view op, std::string_view what) {
  if (PyIndex_Check(obj.ptr())) return Shape{to_int64(obj, op, what)};
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj)) {
    throw py::type_error("expected a shape (an int or a sequence of ints), got " +
                         std::string(py::str(obj.get_type().attr("__name__"))));
  }
  Shape s;
  for (auto item : py::reinterpret_borrow<py::sequence>(obj)) {
    if (!PyIndex_Check(item.ptr())) {
      throw py::type_error("shape entries must be ints, got " + std::string(py::str(item.get_type().attr("__name__"))));
    }
    s.push_back(to_int64(item, op, what));
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
    case Scalar::Tag::Complex: {
      const std::complex<double> c = s.to_complex();
      return py::reinterpret_steal<py::object>(PyComplex_FromDoubles(c.real(), c.imag()));
    }
  }
  return py::none();
}

}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  using namespace kiln::python;
  m.doc() = "kiln: a C++ tensor runtime with PyTorch semantics";
  register_error_translator();
  bind_dtypes(m);
  bind_memory_format(m);
  bind_tensor(m);
  bind_creation(m);
  bind_runtime(m);
  bind_ops(m);
  bind_llm(m);
  bind_composite(m);
  bind_profiler(m);
  bind_indexing(m);
  bind_dlpack(m);
  bind_linalg(m);
  bind_pointwise_index_extra(m);
  bind_devices(m);
  bind_autograd(m);
  bind_nn_functional(m);
  bind_safetensors(m);
  bind_parameter_support(m);
  bind_conv(m);
  bind_inplace(m);
  bind_tensor_extra(m);
}
