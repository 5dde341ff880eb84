// The elementwise loop engine every CPU elementwise kernel runs on.
//
// Operands share one shape (the front end broadcasts them first, so strides may be
// 0) and may have any strides and dtypes. The engine coalesces dims, splits the
// elements across the thread pool, and walks the innermost dim in chunks. For each
// chunk a kernel sees plain contiguous arrays of the dtypes it asked for: an operand
// that already is one is passed in place; any other is gathered and cast into a
// per-thread scratch buffer (and the output cast and scattered back). So a kernel is
// a simple contiguous SIMD loop, and broadcasting, strides, type promotion and
// narrow storage (f16/bf16/fp8 computed in f32) are handled once, here.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "backend/cpu/cast/cast.h"
#include "backend/elementwise.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

using backend::kMaxLoopDims;
inline constexpr int64_t kLoopChunk = 512;     // elements per kernel call
inline constexpr int64_t kLoopGrain = 16384;   // minimum elements per thread

// Byte pointers and strides of N operands over a shared shape, dims coalesced and
// ordered outermost first.
template <int N>
struct LoopGeometry {
  int ndim = 0;
  int64_t sizes[kMaxLoopDims];
  int64_t strides[N][kMaxLoopDims];  // bytes
  char* base[N];
  int64_t numel = 1;

  // With `memory_order`, the dims are walked in the order of ops[0]'s strides (outermost
  // first), so a channels-last or transposed output and inputs laid out alike coalesce
  // into one run instead of being gathered element by element. Only for pure maps (no
  // operand's order of visits matters): elementwise kernels and copies.
  LoopGeometry(const std::array<const Tensor*, N>& ops, const Shape& shape, bool memory_order = false) {
    KILN_CHECK(static_cast<int>(shape.size()) <= kMaxLoopDims, "elementwise",
               "tensors with more than {} dims are not supported (got {})", kMaxLoopDims, shape.size());
    for (int j = 0; j < N; ++j) base[j] = static_cast<char*>(ops[j]->data_ptr());
    if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) {
      // Nothing to visit. An empty view may carry any strides (as_strided checks no
      // extent when there is no element), so their byte strides are not computed.
      numel = 0;
      ndim = 1;
      sizes[0] = 0;
      for (int j = 0; j < N; ++j) strides[j][0] = 0;
      return;
    }
    for (int64_t s : shape) numel *= s;
    int order[kMaxLoopDims];
    const int rank = static_cast<int>(shape.size());
    for (int d = 0; d < rank; ++d) order[d] = d;
    if (memory_order && !strides_descending(*ops[0], shape)) {
      const Shape& st = ops[0]->strides();
      std::stable_sort(order, order + rank, [&](int a, int b) { return st[a] > st[b]; });
    }
    for (int k = 0; k < rank; ++k) {
      const size_t d = static_cast<size_t>(order[k]);
      if (shape[d] == 1) continue;
      bool merge = ndim > 0;
      for (int j = 0; j < N && merge; ++j) {
        int64_t st = ops[j]->strides()[d] * static_cast<int64_t>(ops[j]->element_size());
        merge = strides[j][ndim - 1] == st * shape[d];
      }
      if (merge) {
        sizes[ndim - 1] *= shape[d];
        for (int j = 0; j < N; ++j) {
          strides[j][ndim - 1] = ops[j]->strides()[d] * static_cast<int64_t>(ops[j]->element_size());
        }
      } else {
        sizes[ndim] = shape[d];
        for (int j = 0; j < N; ++j) {
          strides[j][ndim] = ops[j]->strides()[d] * static_cast<int64_t>(ops[j]->element_size());
        }
        ++ndim;
      }
    }
    if (ndim == 0) {  // a single element
      sizes[0] = 1;
      for (int j = 0; j < N; ++j) strides[j][0] = 0;
      ndim = 1;
    }
  }

  // Whether t's strides already fall from the outer dims to the inner ones (row-major
  // and its slices: the common case, one pass over the dims per call).
  static bool strides_descending(const Tensor& t, const Shape& shape) {
    int64_t prev = -1;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      const int64_t st = t.strides()[d];
      if (prev >= 0 && st > prev) return false;
      prev = st;
    }
    return true;
  }

  // Calls row(ptrs, inner_strides, n) for every run of the innermost dim that falls
  // in the flat element range [begin, end).
  template <typename RowFn>
  void for_each_row(int64_t begin, int64_t end, RowFn&& row) const {
    int64_t index[kMaxLoopDims];
    int64_t rem = begin;
    for (int d = ndim - 1; d >= 0; --d) {
      index[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    const int inner = ndim - 1;
    std::array<int64_t, N> inner_strides;
    for (int j = 0; j < N; ++j) inner_strides[j] = strides[j][inner];
    int64_t pos = begin;
    while (pos < end) {
      std::array<char*, N> ptrs;
      for (int j = 0; j < N; ++j) {
        char* p = base[j];
        for (int d = 0; d < ndim; ++d) p += index[d] * strides[j][d];
        ptrs[j] = p;
      }
      int64_t n = std::min(sizes[inner] - index[inner], end - pos);
      row(ptrs, inner_strides, n);
      pos += n;
      index[inner] += n;
      for (int d = inner; d > 0 && index[d] == sizes[d]; --d) {
        index[d] = 0;
        ++index[d - 1];
      }
    }
  }
};

template <typename Kernel, size_t N, size_t... I>
inline void call_kernel(Kernel& kernel, const std::array<char*, N>& args, int64_t n, std::index_sequence<I...>) {
  kernel(args[I]..., n);
}

// Runs kernel(out, in0, in1, ..., n) over contiguous chunks, where `out` holds
// `out_compute` values and each input `in_compute[j]` values.
//   out:  the output tensor (any strides, any dtype; it defines the shape)
//   ins:  inputs already expanded to out's shape
template <int NIn, typename Kernel>
void elementwise_loop(ThreadPool& pool, const Tensor& out, DType out_compute,
                      const std::array<const Tensor*, NIn>& ins, const std::array<DType, NIn>& in_compute,
                      Kernel&& kernel) {
  constexpr int N = NIn + 1;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (int j = 0; j < NIn; ++j) ops[j + 1] = ins[j];
  LoopGeometry<N> geo(ops, out.sizes(), /*memory_order=*/true);
  if (geo.numel == 0) return;
  std::array<DType, N> want;
  std::array<DType, N> have;
  want[0] = out_compute;
  have[0] = out.dtype();
  for (int j = 0; j < NIn; ++j) {
    want[j + 1] = in_compute[j];
    have[j + 1] = ins[j]->dtype();
  }
  // An input that is one value everywhere (a wrapped scalar or a fully expanded 0-dim
  // tensor) is cast into its scratch once per thread instead of once per chunk.
  std::array<bool, N> uniform{};
  for (int j = 1; j < N; ++j) {
    uniform[j] = true;
    for (int d = 0; d < geo.ndim; ++d) uniform[j] = uniform[j] && geo.strides[j][d] == 0;
  }
  pool.parallel_for(geo.numel, kLoopGrain, [&](int64_t begin, int64_t end) {
    // 16-byte elements (complex128) at most.
    alignas(64) char scratch[N][kLoopChunk * 16];
    for (int j = 1; j < N; ++j) {
      if (uniform[j]) cast_strided(have[j], geo.base[j], 0, want[j], scratch[j], itemsize(want[j]), kLoopChunk);
    }
    geo.for_each_row(begin, end, [&](const std::array<char*, N>& ptrs, const std::array<int64_t, N>& st,
                                     int64_t n) {
      for (int64_t off = 0; off < n; off += kLoopChunk) {
        int64_t m = std::min(kLoopChunk, n - off);
        std::array<char*, N> args;
        for (int j = 0; j < N; ++j) {
          char* p = ptrs[j] + off * st[j];
          bool direct = have[j] == want[j] && st[j] == static_cast<int64_t>(itemsize(want[j]));
          if (direct) {
            args[j] = p;
          } else {
            args[j] = scratch[j];
            if (j > 0 && !uniform[j]) cast_strided(have[j], p, st[j], want[j], scratch[j], itemsize(want[j]), m);
          }
        }
        call_kernel(kernel, args, m, std::make_index_sequence<N>{});
        bool out_direct = have[0] == want[0] && st[0] == static_cast<int64_t>(itemsize(want[0]));
        if (!out_direct) {
          cast_strided(want[0], scratch[0], itemsize(want[0]), have[0], ptrs[0] + off * st[0], st[0], m);
        }
      }
    });
  });
}

// Copies src into dst elementwise with casting (src already expanded to dst's shape).
void copy_strided(ThreadPool& pool, const Tensor& dst, const Tensor& src);

}  // namespace kiln::cpu
