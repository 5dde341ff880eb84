// Small helpers shared by the op front ends (internal).
#pragma once

#include <initializer_list>

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {

inline void check_defined(const Tensor& t, const char* op, const char* name) {
  KILN_CHECK(t.defined(), op, "argument '{}' is an undefined tensor", name);
}

// The device an op on `tensors` runs on. They must share one (PyTorch's message
// otherwise), except that a 0-dim CPU tensor, like a Python scalar, may join tensors on
// another device (on_device moves it there).
Device common_device(const char* op, std::initializer_list<const Tensor*> tensors);
// `t` on `device`: itself when already there, else a copy (the 0-dim case above).
Tensor on_device(const Tensor& t, Device device);

}  // namespace kiln
