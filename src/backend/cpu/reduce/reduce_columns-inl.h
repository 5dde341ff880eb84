// Column-group helpers of the SIMD column reductions (internal; included once per target
// by the reduce_kernels_*.cpp files that define HWY_TARGET_INCLUDE): one walk over a
// block of columns in vector groups, and one way to hand per-lane results back as
// ReducePartials.

// Per-target include guard (Highway's pattern: the toggle flips once per target).
#if defined(KILN_BACKEND_CPU_REDUCE_COLUMNS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_REDUCE_COLUMNS_INL_H_
#undef KILN_BACKEND_CPU_REDUCE_COLUMNS_INL_H_
#else
#define KILN_BACKEND_CPU_REDUCE_COLUMNS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <type_traits>

#include "backend/cpu/reduce/reduce_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Runs body(d, group_count, column) over [0, w) in groups of 4 vectors, then single
// vectors, then single lanes, so no load goes past column w.
template <class T, class Body>
HWY_INLINE void ForColumnGroups(size_t w, const Body& body) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  size_t c = 0;
  for (; c + 4 * N <= w; c += 4 * N) body(d, std::integral_constant<size_t, 4>(), c);
  for (; c + N <= w; c += N) body(d, std::integral_constant<size_t, 1>(), c);
  const hn::CappedTag<T, 1> d1;
  for (; c < w; ++c) body(d1, std::integral_constant<size_t, 1>(), c);
}

// Calls set(out[g * N + l], lane l of acc[g] as double) for G vectors of per-column
// results, out pointing at the group's first column.
template <class D, size_t G, class Set>
HWY_INLINE void ScatterLanes(D d, const hn::Vec<D> (&acc)[G], ReducePartial* out, const Set& set) {
  using T = hn::TFromD<D>;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN T lanes[HWY_LANES(T)];
  for (size_t g = 0; g < G; ++g) {
    hn::Store(acc[g], d, lanes);
    for (size_t l = 0; l < N; ++l) set(out[g * N + l], static_cast<double>(lanes[l]));
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
