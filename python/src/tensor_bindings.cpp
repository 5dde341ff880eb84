// kiln.Tensor and kiln.dtype: geometry, views and numpy interop (indexing:
// indexing_bindings.cpp).
#include <pybind11/complex.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <limits>
#include <string>

#include "bindings.h"
#include "foreign_memory.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/type_promotion.h"

namespace kiln::python {
namespace {

// numpy dtype for a kiln dtype, or nothing for dtypes numpy lacks (bf16, fp8).
std::optional<py::dtype> numpy_dtype(DType t) {
  switch (t) {
    case DType::Bool: return py::dtype("bool");
    case DType::UInt8: return py::dtype("uint8");
    case DType::UInt16: return py::dtype("uint16");
    case DType::UInt32: return py::dtype("uint32");
    case DType::UInt64: return py::dtype("uint64");
    case DType::Int8: return py::dtype("int8");
    case DType::Int16: return py::dtype("int16");
    case DType::Int32: return py::dtype("int32");
    case DType::Int64: return py::dtype("int64");
    case DType::Float16: return py::dtype("float16");
    case DType::Float32: return py::dtype("float32");
    case DType::Float64: return py::dtype("float64");
    case DType::Complex64: return py::dtype("complex64");
    case DType::Complex128: return py::dtype("complex128");
    default: return std::nullopt;
  }
}

DType kiln_dtype_of(const py::dtype& dt) {
  char kind = dt.kind();
  auto size = dt.itemsize();
  char order = dt.attr("byteorder").cast<std::string>()[0];
  if (order == '>') {
    throw py::type_error("from_numpy: big-endian arrays are not supported; convert with arr.astype(arr.dtype.newbyteorder('='))");
  }
  struct Entry { char kind; ssize_t size; DType dtype; };
  static const Entry table[] = {
      {'b', 1, DType::Bool},    {'u', 1, DType::UInt8},   {'u', 2, DType::UInt16},   {'u', 4, DType::UInt32},
      {'u', 8, DType::UInt64},  {'i', 1, DType::Int8},    {'i', 2, DType::Int16},    {'i', 4, DType::Int32},
      {'i', 8, DType::Int64},   {'f', 2, DType::Float16}, {'f', 4, DType::Float32},  {'f', 8, DType::Float64},
      {'c', 8, DType::Complex64}, {'c', 16, DType::Complex128},
  };
  for (const auto& e : table) {
    if (e.kind == kind && e.size == size) return e.dtype;
  }
  throw py::type_error("can't convert np.ndarray of type " + py::str(static_cast<const py::handle&>(dt)).cast<std::string>() +
                       ". The only supported types are: float64, float32, float16, complex64, complex128, int64, "
                       "int32, int16, int8, uint64, uint32, uint16, uint8, and bool.");
}

// Zero-copy: the tensor borrows the array's memory and keeps the array alive. A
// read-only array (np.memmap mode='r', a broadcast view, flags.writeable False) gives a
// read-only tensor: reading and out-of-place ops share the memory, in-place ops raise.
Tensor from_numpy(const py::array& arr) {
  DType dtype = kiln_dtype_of(arr.dtype());
  const int64_t isz = static_cast<int64_t>(itemsize(dtype));
  Shape sizes, strides;
  for (ssize_t d = 0; d < arr.ndim(); ++d) {
    int64_t st = arr.strides(d);
    if (st % isz != 0) throw py::value_error("from_numpy: array strides must be multiples of the element size");
    sizes.push_back(arr.shape(d));
    strides.push_back(st / isz);
  }
  auto* owner = new py::object(arr);
  std::shared_ptr<void> keep_alive(owner, [](py::object* o) {
    py::gil_scoped_acquire gil;  // the last reference may drop on any thread
    delete o;
  });
  char* data = static_cast<char*>(const_cast<void*>(arr.data()));
  return borrow_foreign(data, dtype, sizes, strides, std::move(keep_alive), !arr.writeable(), "from_numpy");
}

py::array to_numpy(const Tensor& t) {
  if (t.device().type != DeviceType::CPU) {
    throw py::type_error("can't convert " + t.device().str() +
                         " device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.");
  }
  auto dt = numpy_dtype(t.dtype());
  if (!dt) {
    throw py::type_error("Got unsupported ScalarType " + std::string(dtype_name(t.dtype())) +
                         ": numpy has no such dtype; convert first, e.g. t.to(kiln.float32).numpy()");
  }
  std::vector<ssize_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<ssize_t> strides;
  // A dim never stepped (one element, or any dim of an empty tensor) may carry any stride
  // (2^62 elements would overflow in bytes): numpy gets 0 there.
  for (int64_t d = 0; d < t.dim(); ++d) {
    const bool stepped = t.numel() > 0 && t.size(d) > 1;
    strides.push_back(stepped ? t.stride(d) * static_cast<int64_t>(t.element_size()) : 0);
  }
  py::capsule owner(new Tensor(t), [](void* p) { delete static_cast<Tensor*>(p); });
  void* data = t.data_ptr();
  static char dummy;  // numpy wants a non-null pointer even for empty arrays
  py::array out(*dt, shape, strides, data ? data : &dummy, owner);
  // Read-only memory stays read-only through numpy too.
  if (t.storage()->read_only) out.attr("setflags")(py::arg("write") = false);
  return out;
}

Shape shape_args(const py::args& args, const char* op, const char* what = "size") {
  if (args.size() == 1 && !PyIndex_Check(args[0].ptr())) return to_shape(args[0], op, what);
  return to_shape(args, op, what);
}

py::tuple shape_tuple(const Shape& s) {
  py::tuple out(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = py::int_(s[i]);
  return out;
}

}  // namespace

void bind_dtypes(py::module_& m) {
  auto dtype = py::enum_<DType>(m, "dtype");
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    dtype.value(std::string(dtype_name(t)).c_str(), t);
  }
  dtype.export_values();
  // Replace (not overload) the enum's own __repr__/__str__: PyTorch prints "torch.float32".
  auto name = py::cpp_function([](DType t) { return "kiln." + std::string(dtype_name(t)); }, py::is_method(dtype));
  dtype.attr("__repr__") = name;
  dtype.attr("__str__") = name;
  dtype.def_property_readonly("itemsize", [](DType t) { return itemsize(t); })
      .def_property_readonly("is_floating_point", [](DType t) { return is_floating(t); })
      .def_property_readonly("is_complex", [](DType t) { return is_complex(t); })
      .def_property_readonly("is_signed", [](DType t) {
        return dtype_kind(t) == DTypeKind::Signed || is_floating(t) || is_complex(t);
      });
  m.def("dtype_from_name", [](const std::string& name) { return dtype_from_name(name); });
  m.def("promote_types", &promote_types);
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor");
  cls.def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.sizes()); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("device", [](const Tensor& t) { return t.device().str(); })
      .def_property_readonly("T", [](const Tensor& t) {
        Shape rev;
        for (int64_t d = t.dim() - 1; d >= 0; --d) rev.push_back(d);
        return t.permute(rev);
      })
      .def("size", [](const Tensor& t, std::optional<int64_t> d) -> py::object {
        if (d) return py::int_(t.size(*d));
        return shape_tuple(t.sizes());
      }, py::arg("dim") = py::none())
      .def("stride", [](const Tensor& t, std::optional<int64_t> d) -> py::object {
        if (d) return py::int_(t.stride(*d));
        return shape_tuple(t.strides());
      }, py::arg("dim") = py::none())
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("element_size", &Tensor::element_size)
      .def("storage_offset", &Tensor::storage_offset)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("is_contiguous", [](const Tensor& t, MemoryFormat f) { return t.is_contiguous(f); }, py::kw_only(),
           py::arg("memory_format") = MemoryFormat::Contiguous)
      .def("contiguous", [](const Tensor& t, MemoryFormat f) { return t.contiguous(f); }, py::kw_only(),
           py::arg("memory_format") = MemoryFormat::Contiguous)
      // PyTorch's defaults: copies keep the input's memory format.
      .def("clone", [](const Tensor& t, MemoryFormat f) { return t.clone(f); }, py::kw_only(),
           py::arg("memory_format") = MemoryFormat::Preserve)
      .def("to", [](const Tensor& t, DType d, MemoryFormat f) { return t.to(d, f); }, py::arg("dtype"), py::kw_only(),
           py::arg("memory_format") = MemoryFormat::Preserve)
      .def("to", [](const Tensor& t, MemoryFormat f) { return t.to(t.dtype(), f); }, py::kw_only(),
           py::arg("memory_format"))
      .def("float", [](const Tensor& t) { return t.to(DType::Float32, MemoryFormat::Preserve); })
      .def("double", [](const Tensor& t) { return t.to(DType::Float64, MemoryFormat::Preserve); })
      .def("half", [](const Tensor& t) { return t.to(DType::Float16, MemoryFormat::Preserve); })
      .def("bfloat16", [](const Tensor& t) { return t.to(DType::BFloat16, MemoryFormat::Preserve); })
      .def("int", [](const Tensor& t) { return t.to(DType::Int32); })
      .def("long", [](const Tensor& t) { return t.to(DType::Int64); })
      .def("bool", [](const Tensor& t) { return t.to(DType::Bool); })
      .def("copy_", [](Tensor& t, const Tensor& src) { return t.copy_(src); })
      .def("fill_", [](Tensor& t, const py::object& v) { return t.fill_(to_scalar(v, "fill_")); })
      .def("zero_", [](Tensor& t) { return t.zero_(); })
      .def("item", [](const Tensor& t) { return from_scalar(t.item()); })
      .def("numpy", &to_numpy)
      .def("__array__", [](const Tensor& t, py::object dtype) {
        py::array a = to_numpy(t);
        return dtype.is_none() ? py::object(a) : a.attr("astype")(dtype);
      }, py::arg("dtype") = py::none())
      .def("tolist", [](const Tensor& t) {
        Tensor src = numpy_dtype(t.dtype()) ? t : t.to(is_complex(t.dtype()) ? t.dtype() : DType::Float32);
        return to_numpy(src).attr("tolist")();
      })
      .def("view", [](const Tensor& t, const py::args& a) {
        // t.view(dtype) reinterprets bytes in PyTorch; kiln supports the shape form only.
        if (a.size() == 1 && py::isinstance<DType>(a[0])) {
          throw py::type_error("view(dtype) is not supported; use .to(dtype) to convert");
        }
        return t.view(shape_args(a, "view"));
      })
      .def("reshape", [](const Tensor& t, const py::args& a) { return t.reshape(shape_args(a, "reshape")); })
      .def("permute", [](const Tensor& t, const py::args& a) { return t.permute(shape_args(a, "permute", "dim")); })
      .def("transpose", &Tensor::transpose)
      .def("t", &Tensor::t)
      .def("expand", [](const Tensor& t, const py::args& a) { return t.expand(shape_args(a, "expand")); })
      .def("expand_as", &Tensor::expand_as)
      .def("narrow", &Tensor::narrow)
      .def("select", &Tensor::select)
      .def("squeeze", [](const Tensor& t, std::optional<int64_t> d) { return d ? t.squeeze(*d) : t.squeeze(); },
           py::arg("dim") = py::none())
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("unflatten", &Tensor::unflatten)
      .def("movedim", &Tensor::movedim)
      .def("as_strided", [](const Tensor& t, const py::object& size, const py::object& stride,
                            std::optional<int64_t> offset) {
        return t.as_strided(to_shape(size, "as_strided"), to_shape(stride, "as_strided", "stride"), offset);
      },
           py::arg("size"), py::arg("stride"), py::arg("storage_offset") = py::none())
      .def("__len__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.size(0);
      })
      .def("__repr__", &Tensor::str)
      .def("__bool__", [](const Tensor& t) {
        if (t.numel() != 1) {
          throw py::value_error("Boolean value of Tensor with more than one value is ambiguous");
        }
        return t.item().to_bool();
      })
      .def("__float__", [](const Tensor& t) { return t.item().to_double(); })
      .def("__int__", [](const Tensor& t) { return t.item().to_int64(); })
      .def("__index__", [](const Tensor& t) {
        if (!is_integral(t.dtype(), true) || t.numel() != 1) {
          throw py::type_error("only integer tensors of a single element can be converted to an index");
        }
        return t.item().to_int64();
      });
  m.def("from_numpy", &from_numpy, py::arg("ndarray"));
}

}  // namespace kiln::python
