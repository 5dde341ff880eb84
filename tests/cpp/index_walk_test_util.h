// Walks every multi-index of a shape, for tests that check an op element by element
// against a plain formula (test_index_ops.cpp, test_shape_ops.cpp).
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::testing {

// Calls fn(index) for every multi-index of `shape`, row-major.
template <typename F>
void for_each_index(const Shape& shape, F&& fn) {
  if (shape_numel(shape) == 0) return;
  Shape index(shape.size(), 0);
  while (true) {
    fn(index);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace kiln::testing
