// Helpers shared by the reduction front ends (reduce.cpp, reduce_stats.cpp): dim-list
// parsing, PyTorch's dtype names for messages, and writing finished values out.
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/reduce/reduce_loop.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
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
  for (int64_t d = 0; d < ndim; ++d) {
    if (r.reduced[d]) {
      r.count *= input.sizes()[d];
      if (keepdim) r.out_shape.push_back(1);
    } else {
      r.out_shape.push_back(input.sizes()[d]);
    }
  }
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

// Writes n values of type T (double, int64_t or std::complex<double>) to the contiguous
// tensor `out` at element `first`, converting to out's dtype.
template <class T>
void store_values(const Tensor& out, int64_t first, int64_t n, const T* values) {
  constexpr DType src = std::is_same_v<T, double>    ? DType::Float64
                        : std::is_same_v<T, int64_t> ? DType::Int64
                                                     : DType::Complex128;
  const int64_t size = static_cast<int64_t>(out.element_size());
  cpu::cast_strided(src, values, sizeof(T), out.dtype(), static_cast<char*>(out.data_ptr()) + first * size, size, n);
}

// How a ReducePartial holds its result for input of dtype t.
enum class PartialValue { Real, Integer, Complex };
inline PartialValue partial_value_of(DType t) {
  if (is_complex(t)) return PartialValue::Complex;
  return is_floating(t) ? PartialValue::Real : PartialValue::Integer;
}

// Writes the plain value of each partial (v[0], i, or v[0] + i v[1]) divided by
// `divisor` (1 for sums; the count for means) into `out`.
inline void store_partial_values(const Tensor& out, PartialValue kind, const cpu::ReducePartial* p, int64_t first,
                                 int64_t n, double divisor = 1.0) {
  constexpr int64_t kBatch = 256;
  for (int64_t k0 = 0; k0 < n; k0 += kBatch) {
    const int64_t m = std::min(kBatch, n - k0);
    if (kind == PartialValue::Integer) {
      int64_t buf[kBatch];
      for (int64_t k = 0; k < m; ++k) buf[k] = p[k0 + k].i;
      store_values(out, first + k0, m, buf);
    } else if (kind == PartialValue::Real) {
      double buf[kBatch];
      for (int64_t k = 0; k < m; ++k) buf[k] = p[k0 + k].v[0] / divisor;
      store_values(out, first + k0, m, buf);
    } else {
      std::complex<double> buf[kBatch];
      for (int64_t k = 0; k < m; ++k) buf[k] = std::complex<double>(p[k0 + k].v[0] / divisor, p[k0 + k].v[1] / divisor);
      store_values(out, first + k0, m, buf);
    }
  }
}

// The real tensor viewing a complex one's (re, im) pairs as a trailing dim of size 2.
inline Tensor view_as_real(const Tensor& z) {
  Shape sizes = z.sizes(), strides = z.strides();
  for (int64_t& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  return Tensor::from_storage(z.storage(), sizes, strides, z.storage_offset() * 2, to_real(z.dtype()));
}

}  // namespace kiln
