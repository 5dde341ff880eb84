// Tensors over memory another library owns (numpy arrays, DLPack capsules): shared by
// from_numpy (tensor_bindings.cpp) and from_dlpack (dlpack_bindings.cpp).
#pragma once

#include <memory>
#include <string>

#include "bindings.h"

namespace kiln::python {

// A tensor viewing `data` (the element at index 0 of every dim) with the given sizes and
// element strides, any of which may be negative or 0. `keep_alive` is released when the
// last tensor viewing the memory goes; a read-only view refuses in-place ops. Every
// extent is checked arithmetic: a geometry whose byte range overflows int64 is an error
// naming `op`.
Tensor borrow_foreign(char* data, DType dtype, const Shape& sizes, const Shape& strides,
                      std::shared_ptr<void> keep_alive, bool read_only, const std::string& op);

}  // namespace kiln::python
