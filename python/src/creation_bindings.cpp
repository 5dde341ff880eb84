// kiln.zeros/ones/full/empty/arange/linspace/eye/rand/randn/randint and Generator.
#include <pybind11/complex.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "kiln/ops/creation.h"

namespace kiln::python {
namespace {

// zeros(2, 3) and zeros((2, 3)) both mean shape [2, 3], as in PyTorch.
// generator=None means kiln's default generator (nullptr for the C++ API). Taken as an
// object: pybind11 refuses None for a pointer parameter that follows *args.
Generator* generator_or_default(const py::object& g) { return g.is_none() ? nullptr : g.cast<Generator*>(); }

Shape size_args(const py::args& args, const char* op) {
  if (args.size() == 1 && !PyIndex_Check(args[0].ptr())) return to_shape(args[0], op);
  return to_shape(args, op);
}

DType dtype_or(const py::object& dtype, DType fallback) {
  return dtype.is_none() ? fallback : to_dtype(dtype);
}

std::optional<DType> opt_dtype(const py::object& dtype) {
  if (dtype.is_none()) return std::nullopt;
  return to_dtype(dtype);
}

}  // namespace

void bind_creation(py::module_& m) {
  m.def("empty", [](const py::args& a, const py::object& dtype) { return empty(size_args(a, "empty"), dtype_or(dtype, DType::Float32)); },
        py::kw_only(), py::arg("dtype") = py::none());
  m.def("zeros", [](const py::args& a, const py::object& dtype) { return zeros(size_args(a, "zeros"), dtype_or(dtype, DType::Float32)); },
        py::kw_only(), py::arg("dtype") = py::none());
  m.def("ones", [](const py::args& a, const py::object& dtype) { return ones(size_args(a, "ones"), dtype_or(dtype, DType::Float32)); },
        py::kw_only(), py::arg("dtype") = py::none());
  m.def("full", [](const py::object& size, const py::object& value, const py::object& dtype) {
    return full(to_shape(size, "full"), to_scalar(value, "full"), opt_dtype(dtype));
  }, py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none());
  // PyTorch's default memory format for the *_like ops is preserve_format.
  m.def("empty_like", [](const Tensor& t, const py::object& dtype, MemoryFormat f) {
    return empty_like(t, f, opt_dtype(dtype));
  }, py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("memory_format") = MemoryFormat::Preserve);
  m.def("zeros_like", [](const Tensor& t, const py::object& dtype, MemoryFormat f) {
    return zeros_like(t, f, opt_dtype(dtype));
  }, py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("memory_format") = MemoryFormat::Preserve);
  m.def("ones_like", [](const Tensor& t, const py::object& dtype, MemoryFormat f) {
    return ones_like(t, f, opt_dtype(dtype));
  }, py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("memory_format") = MemoryFormat::Preserve);
  m.def("full_like", [](const Tensor& t, const py::object& v, const py::object& dtype, MemoryFormat f) {
    return full_like(t, to_scalar(v, "full_like"), f, opt_dtype(dtype));
  }, py::arg("input"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
        py::arg("memory_format") = MemoryFormat::Preserve);
  m.def("scalar_tensor", [](const py::object& v, const py::object& dtype) { return scalar_tensor(to_scalar(v), opt_dtype(dtype)); },
        py::arg("s"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("arange", [](const py::object& start, const py::object& end, const py::object& step, const py::object& dtype) {
    if (end.is_none()) {
      return arange(Scalar(int64_t{0}), to_scalar(start, "arange"), to_scalar(step, "arange"), opt_dtype(dtype));
    }
    return arange(to_scalar(start, "arange"), to_scalar(end, "arange"), to_scalar(step, "arange"), opt_dtype(dtype));
  }, py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(), py::arg("dtype") = py::none());
  m.def("linspace", [](const py::object& start, const py::object& end, int64_t steps, const py::object& dtype) {
    return linspace(to_scalar(start, "linspace"), to_scalar(end, "linspace"), steps, opt_dtype(dtype));
  }, py::arg("start"), py::arg("end"), py::arg("steps"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("eye", [](int64_t n, std::optional<int64_t> mm, const py::object& dtype) {
    return eye(n, mm, dtype_or(dtype, DType::Float32));
  }, py::arg("n"), py::arg("m") = py::none(), py::kw_only(), py::arg("dtype") = py::none());

  py::class_<Generator>(m, "Generator")
      .def(py::init<uint64_t>(), py::arg("seed") = 0)
      .def("manual_seed", [](Generator& g, uint64_t s) -> Generator& { g.manual_seed(s); return g; },
           py::return_value_policy::reference)
      .def("initial_seed", &Generator::seed);
  m.def("manual_seed", &manual_seed, py::arg("seed"));
  m.def("rand", [](const py::args& a, const py::object& dtype, const py::object& g) {
    return rand(size_args(a, "rand"), dtype_or(dtype, DType::Float32), generator_or_default(g));
  }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("generator") = py::none());
  m.def("randn", [](const py::args& a, const py::object& dtype, const py::object& g) {
    return randn(size_args(a, "randn"), dtype_or(dtype, DType::Float32), generator_or_default(g));
  }, py::kw_only(), py::arg("dtype") = py::none(), py::arg("generator") = py::none());
  m.def("randint", [](int64_t low, const py::object& high, const py::object& size, const py::object& dtype, Generator* g) {
    // randint(high, size) and randint(low, high, size), as torch.randint.
    if (size.is_none()) return randint(0, low, to_shape(high, "randint"), dtype_or(dtype, DType::Int64), g);
    return randint(low, to_int64(high, "randint", "high"), to_shape(size, "randint"), dtype_or(dtype, DType::Int64), g);
  }, py::arg("low"), py::arg("high"), py::arg("size") = py::none(), py::kw_only(), py::arg("dtype") = py::none(),
        py::arg("generator") = py::none());
}

}  // namespace kiln::python
