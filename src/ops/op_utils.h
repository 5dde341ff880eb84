// Small helpers shared by the op front ends (internal).
#pragma once

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {

inline void check_defined(const Tensor& t, const char* op, const char* name) {
  KILN_CHECK(t.defined(), op, "argument '{}' is an undefined tensor", name);
}

}  // namespace kiln
