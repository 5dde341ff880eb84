// DLPack interchange: Tensor.__dlpack__ / __dlpack_device__ and kiln.from_dlpack, zero-copy
// both ways (numpy >= 1.22, PyTorch, JAX, CuPy's host arrays ...).
//
// The ABI is DLPack's unversioned DLManagedTensor in a PyCapsule named "dltensor", which
// the consumer renames "used_dltensor" when it takes ownership; the struct comes from
// Debian's libdlpack-dev (DLPack 0.6). Type codes newer than that header are defined
// below from the DLPack version that introduced them.
#include <dlpack/dlpack.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "foreign_memory.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::python {
namespace {

constexpr uint8_t kCodeBool = 6;             // kDLBool, DLPack 0.8
constexpr uint8_t kCodeFloat8_e4m3fn = 10;   // kDLFloat8_e4m3fn, DLPack 1.1
constexpr uint8_t kCodeFloat8_e5m2 = 12;     // kDLFloat8_e5m2, DLPack 1.1
constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

struct DLPackCode {
  uint8_t code;
  uint8_t bits;
  DType dtype;
};

constexpr DLPackCode kCodes[] = {
    {kCodeBool, 8, DType::Bool},        {kDLUInt, 8, DType::UInt8},          {kDLUInt, 16, DType::UInt16},
    {kDLUInt, 32, DType::UInt32},       {kDLUInt, 64, DType::UInt64},        {kDLInt, 8, DType::Int8},
    {kDLInt, 16, DType::Int16},         {kDLInt, 32, DType::Int32},          {kDLInt, 64, DType::Int64},
    {kDLFloat, 16, DType::Float16},     {kDLBfloat, 16, DType::BFloat16},    {kDLFloat, 32, DType::Float32},
    {kDLFloat, 64, DType::Float64},     {kDLComplex, 64, DType::Complex64},  {kDLComplex, 128, DType::Complex128},
    {kCodeFloat8_e4m3fn, 8, DType::Float8_e4m3fn}, {kCodeFloat8_e5m2, 8, DType::Float8_e5m2},
};

DLDataType dlpack_dtype(DType t) {
  for (const DLPackCode& c : kCodes) {
    if (c.dtype == t) return DLDataType{c.code, c.bits, 1};
  }
  throw py::type_error("__dlpack__: no DLPack type code for " + std::string(dtype_name(t)));
}

DType kiln_dtype(const DLDataType& t) {
  if (t.lanes != 1) {
    throw py::type_error("from_dlpack: vector types (lanes = " + std::to_string(t.lanes) +
                         ") are not supported; kiln tensors hold one value per element");
  }
  for (const DLPackCode& c : kCodes) {
    if (c.code == t.code && c.bits == t.bits) return c.dtype;
  }
  throw py::type_error("from_dlpack: unsupported DLPack dtype (code " + std::to_string(t.code) + ", " +
                       std::to_string(t.bits) + " bits); kiln takes bool, (u)int8-64, float16/32/64, bfloat16, "
                       "complex64/128, float8_e4m3fn and float8_e5m2");
}

// What an exported capsule owns: a tensor (so kiln's storage outlives the consumer's use
// of it) and the shape and stride arrays the DLTensor points at.
struct Export {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

void delete_export(DLManagedTensor* managed) {
  // The consumer may call this from any thread; dropping the tensor may release a numpy
  // array kiln borrowed, which takes the GIL itself (from_numpy's keep-alive).
  delete static_cast<Export*>(managed->manager_ctx);
}

// A capsule nobody consumed still owns its tensor.
void destroy_capsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;  // consumed: the consumer owns it
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

py::capsule to_dlpack(const Tensor& t, const py::object& stream);

// The array API's keywords: max_version may ask for a versioned capsule, which a
// consumer must do without when the producer returns the unversioned one (as here);
// dl_device must be the CPU; copy=True exports a copy.
py::capsule dlpack_method(const Tensor& t, const py::object& stream, const py::object& max_version,
                          const py::object& dl_device, const py::object& copy) {
  if (!dl_device.is_none()) {
    const py::tuple device = dl_device;
    if (device.size() != 2 || device[0].cast<int64_t>() != kDLCPU || device[1].cast<int64_t>() != 0) {
      PyErr_SetString(PyExc_BufferError, ("__dlpack__: kiln tensors live on the CPU (DLPack device (1, 0)); cannot "
                                          "export to device " + std::string(py::str(dl_device))).c_str());
      throw py::error_already_set();
    }
  }
  (void)max_version;
  const bool want_copy = !copy.is_none() && copy.cast<bool>();
  return to_dlpack(want_copy ? t.clone() : t, stream);
}

py::capsule to_dlpack(const Tensor& t, const py::object& stream) {
  if (!stream.is_none()) {
    throw py::value_error("__dlpack__: stream must be None for a CPU tensor (got " +
                          std::string(py::str(stream)) + ")");
  }
  if (t.storage()->read_only) {
    // DLPack 0.x cannot say "read-only", and a consumer would write through it.
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: cannot export a read-only tensor (a view of a read-only numpy array or of a "
                    "file mapped read-only): DLPack cannot mark memory read-only; export t.clone() instead");
    throw py::error_already_set();
  }
  auto ex = std::make_unique<Export>();
  ex->tensor = t;
  ex->shape.assign(t.sizes().begin(), t.sizes().end());
  ex->strides.assign(t.strides().begin(), t.strides().end());
  DLTensor& dl = ex->managed.dl_tensor;
  dl.data = t.data_ptr();
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = dlpack_dtype(t.dtype());
  dl.shape = ex->shape.data();
  dl.strides = ex->strides.data();
  dl.byte_offset = 0;
  ex->managed.manager_ctx = ex.get();
  ex->managed.deleter = &delete_export;
  PyObject* capsule = PyCapsule_New(&ex->managed, kCapsuleName, &destroy_capsule);
  if (capsule == nullptr) throw py::error_already_set();
  ex.release();  // the capsule (or its consumer) owns it now
  return py::reinterpret_steal<py::capsule>(capsule);
}

// DLPack device types kiln can read without a copy: host memory.
bool is_host_device(int64_t type) { return type == kDLCPU || type == kDLCUDAHost; }

Tensor from_dlpack(const py::object& obj) {
  py::object capsule;
  if (py::hasattr(obj, "__dlpack__")) {
    if (py::hasattr(obj, "__dlpack_device__")) {
      const py::tuple device = obj.attr("__dlpack_device__")();
      const int64_t type = device[0].cast<int64_t>();
      if (!is_host_device(type)) {
        PyErr_SetString(PyExc_BufferError, ("from_dlpack: kiln reads host memory only, and this " +
                                            std::string(py::str(obj.get_type().attr("__name__"))) +
                                            " lives on DLPack device type " + std::to_string(type) +
                                            "; copy it to the CPU first")
                                               .c_str());
        throw py::error_already_set();
      }
    }
    capsule = obj.attr("__dlpack__")();
  } else if (PyCapsule_CheckExact(obj.ptr())) {
    capsule = obj;  // the legacy protocol: a capsule from to_dlpack()
  } else {
    throw py::type_error("from_dlpack: expected an object with __dlpack__ (a numpy array, torch or jax tensor) or a "
                         "DLPack capsule, got " + std::string(py::str(obj.get_type().attr("__name__"))));
  }
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) {
    throw py::value_error("from_dlpack: the capsule is not an unused DLPack tensor (a capsule can be imported once)");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  const DLTensor& dl = managed->dl_tensor;
  // Validate before taking ownership: on an error the capsule still owns the tensor and
  // frees it when it goes.
  if (!is_host_device(dl.device.device_type)) {
    throw py::value_error("from_dlpack: kiln reads host memory only; the tensor is on DLPack device type " +
                          std::to_string(dl.device.device_type));
  }
  const DType dtype = kiln_dtype(dl.dtype);
  if (dl.ndim < 0) throw py::value_error("from_dlpack: negative ndim " + std::to_string(dl.ndim));
  Shape sizes(dl.shape, dl.shape + dl.ndim);
  Shape strides;
  if (dl.strides != nullptr) {
    strides.assign(dl.strides, dl.strides + dl.ndim);
  } else {
    strides = contiguous_strides(sizes, "from_dlpack");  // DLPack: no strides means row-major
  }
  char* data = static_cast<char*>(dl.data);
  if (data != nullptr) data += dl.byte_offset;
  const size_t isz = itemsize(dtype);
  if (data != nullptr && reinterpret_cast<uintptr_t>(data) % isz != 0) {
    throw py::value_error("from_dlpack: the data is not aligned to its " + std::to_string(isz) +
                          "-byte elements, which kiln's kernels need; copy it on the producing side first");
  }
  // Ownership moves to kiln here; from now on only keep_alive calls the deleter.
  if (PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName) != 0) throw py::error_already_set();
  std::shared_ptr<void> keep_alive(managed, [](DLManagedTensor* m) {
    if (m->deleter == nullptr) return;
    py::gil_scoped_acquire gil;  // producers such as numpy release Python objects here
    m->deleter(m);
  });
  return borrow_foreign(data, dtype, sizes, strides, std::move(keep_alive), false, "from_dlpack");
}

}  // namespace

void bind_dlpack(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  cls.def("__dlpack__", &dlpack_method, py::kw_only(), py::arg("stream") = py::none(),
          py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none());
  cls.def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); });
  m.def("from_dlpack", &from_dlpack, py::arg("ext_tensor"));
  m.def("to_dlpack", [](const Tensor& t) { return to_dlpack(t, py::none()); }, py::arg("tensor"));
}

}  // namespace kiln::python
