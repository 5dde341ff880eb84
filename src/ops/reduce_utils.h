// Helpers shared by the reduction front ends (reduce.cpp, reduce_stats.cpp): dim-list
// parsing and the checks of reduced dims.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/tensor.h"

namespace kiln {

struct ReduceDims {
  std::vector<bool> reduced;  // per input dim
  Shape out_shape;            // reduced dims dropped, or kept as 1 with keepdim
  int64_t count = 1;          // elements reduced into each output
};

// Wraps and checks `dims` (empty: every dim) for a reduction of `input`.
inline ReduceDims reduce_dims(const Tensor& input, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  const int64_t ndim = input.dim();
  ReduceDims r;
  r.reduced.assign(static_cast<size_t>(ndim), dims.empty());
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(ndim, 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, ndim, op);
    KILN_CHECK(!seen[w], op, "dim {} appears multiple times in the list of dims", w);
    seen[w] = true;
    if (ndim > 0) r.reduced[w] = true;
  }
  bool count_fits = true;
  for (int64_t d = 0; d < ndim; ++d) {
    if (r.reduced[d]) {
      count_fits = count_fits && checked_mul(r.count, input.sizes()[d], &r.count);
      if (keepdim) r.out_shape.push_back(1);
    } else {
      r.out_shape.push_back(input.sizes()[d]);
    }
  }
  // The input's numel fits, so the count overflows only next to a 0 among the kept dims:
  // an empty output, for which the count is never used.
  if (!count_fits) r.count = 0;
  return r;
}

// Reduction over one dim (wrapped; 0-dim input accepts 0 and -1).
inline ReduceDims reduce_one_dim(const Tensor& input, int64_t dim, bool keepdim, const char* op) {
  return reduce_dims(input, {dim}, keepdim, op);
}

// The first reduced dim of size 0 (PyTorch's IndexError for max/min-like ops).
inline void check_reduced_dims_nonempty(const Tensor& input, const ReduceDims& r, const char* op) {
  for (int64_t d = 0; d < input.dim(); ++d) {
    KILN_CHECK_KIND(!(r.reduced[d] && input.sizes()[d] == 0), Index, op,
                    "Expected reduction dim {} to have non-zero size.", d);
  }
}

}  // namespace kiln
