// One bind_* function per family; module.cpp calls them all.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

#include "kiln/dtype.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln::python {

namespace py = pybind11;

void bind_dtypes(py::module_& m);
void bind_tensor(py::module_& m);
void bind_creation(py::module_& m);
void bind_runtime(py::module_& m);
void bind_threads(py::module_& m);  // called by bind_runtime
void bind_ops(py::module_& m);
void bind_llm(py::module_& m);
void bind_composite(py::module_& m);  // the kiln.composite submodule

// A Python number (bool, int, float, complex) as a kiln::Scalar; TypeError otherwise.
Scalar to_scalar(const py::handle& obj);
bool is_python_number(const py::handle& obj);
Shape to_shape(const py::handle& obj);  // int, or a sequence of ints
py::object from_scalar(const Scalar& s);
// A kiln.dtype object; TypeError for anything else (as PyTorch for dtype="float32").
DType to_dtype(const py::handle& obj);

}  // namespace kiln::python
