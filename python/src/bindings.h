// One bind_* function per family; module.cpp calls them all.
#pragma once

#include <pybind11/pybind11.h>

#include "int_caster.h"

#include <optional>
#include <string>
#include <string_view>

#include "kiln/allocator.h"
#include "kiln/dtype.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln::python {

namespace py = pybind11;

void bind_dtypes(py::module_& m);
void bind_memory_format(py::module_& m);  // kiln.memory_format; before bind_tensor, which names it
void bind_tensor(py::module_& m);
void bind_creation(py::module_& m);
void bind_runtime(py::module_& m);
void bind_threads(py::module_& m);  // called by bind_runtime
void bind_ops(py::module_& m);
void bind_llm(py::module_& m);
void bind_composite(py::module_& m);  // the kiln.composite submodule
void bind_profiler(py::module_& m);   // the kiln.profiler submodule
void bind_indexing(py::module_& m);   // Tensor.__getitem__/__setitem__, index_put_, nonzero
void bind_dlpack(py::module_& m);     // __dlpack__, __dlpack_device__, from_dlpack
void bind_linalg(py::module_& m);     // the kiln.linalg submodule
void bind_pointwise_index_extra(py::module_& m);  // frexp, take, bincount, kiln.special, ...
void bind_devices(py::module_& m);  // kiln.device, Tensor.to(device), the kiln.vulkan submodule
void bind_autograd(py::module_& m);
void bind_nn_functional(py::module_& m);  // cross_entropy, mse_loss, pad   // Tensor.requires_grad/backward and kiln._kiln._autograd
void bind_safetensors(py::module_& m);        // load_safetensors / save_safetensors
void bind_parameter_support(py::module_& m);  // Tensor(t) and Tensor.data, for kiln.nn.Parameter
void bind_conv(py::module_& m);  // conv1d/2d/3d, conv_transpose1d/2d/3d, convolution_backward
void bind_inplace(py::module_& m);  // Tensor.exp_, relu_, clamp_, ... (kiln/ops/elementwise_inplace.h)
// repeat, tile, tril/triu, unique, isclose/allclose/equal, any/all, conj, mT/mH/H
void bind_tensor_extra(py::module_& m);
// kiln::Error, std::bad_alloc and other C++ exceptions -> the Python exception PyTorch
// raises, with the message intact whatever bytes it quotes (errors.cpp).
void register_error_translator();

// Python ints are unbounded; kiln's sizes, dims, indices and integer scalars are
// int64 (uint64 for scalars). An int outside that range is a RuntimeError (PyTorch's
// kind for it) that names the op when `op` is given, the argument and its value:
// "zeros: size 9223372036854775808 is out of range for int64 (expected ...)".

// A Python int (or an object with __index__) as int64.
int64_t to_int64(const py::handle& obj, std::string_view op, std::string_view what);
// A Python number as a double; an int past float64 (2**1024 and up) is refused alike.
double to_double(const py::handle& obj, std::string_view op, std::string_view what);
// An int's decimal digits, or its bit length when it is too long to print.
std::string describe_int(const py::handle& obj);
// The same, with values past either end clamped to it (Python's slice bounds).
int64_t to_int64_clamped(const py::handle& obj);
// A Python number (bool, int, float, complex) as a kiln::Scalar; TypeError otherwise.
Scalar to_scalar(const py::handle& obj, std::string_view op = {});
bool is_python_number(const py::handle& obj);
// An int, or a sequence of ints; `what` names an entry in errors ("size", "dim").
Shape to_shape(const py::handle& obj, std::string_view op = {}, std::string_view what = "size");
py::object from_scalar(const Scalar& s);
// A kiln.dtype object; TypeError for anything else (as PyTorch for dtype="float32").
DType to_dtype(const py::handle& obj);
// kiln.memory_stats()'s dict (also kiln.vulkan.memory_stats()).
py::dict allocator_stats_dict(const AllocatorStats& s);

}  // namespace kiln::python
