// SIMD max/min-like reductions over float32/float64: Max, Min (also of |x|, for the
// inf norms), ArgMax, ArgMin, on contiguous rows and on blocks of columns. Compiled
// once per Highway target.
//
// PyTorch semantics: NaN beats every number (a NaN anywhere makes the result NaN, and
// the arg ops report the first NaN); among equal values the first index wins. Hardware
// max/min instructions do not propagate NaN reliably, so each step is an explicit
// compare and select: take x when it is better than the accumulator or is NaN (for the
// arg ops: only when the accumulator is not NaN yet, which keeps the first NaN).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/reduce/reduce_kernels_minmax.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cpu/reduce/reduce_columns-inl.h"
#include "backend/cpu/reduce/reduce_kernels.h"
#include "kiln/error.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <bool kMax, class D>
HWY_INLINE hn::Mask<D> Better(hn::Vec<D> x, hn::Vec<D> than) {
  if constexpr (kMax) {
    return hn::Gt(x, than);
  } else {
    return hn::Lt(x, than);
  }
}

template <bool kAbs, class D>
HWY_INLINE hn::Vec<D> Load(D d, const hn::TFromD<D>* p) {
  const auto v = hn::LoadU(d, p);
  if constexpr (kAbs) {
    return hn::Abs(v);
  } else {
    return v;
  }
}

template <bool kMax, class D>
HWY_INLINE hn::Vec<D> Step(hn::Vec<D> acc, hn::Vec<D> x) {
  return hn::IfThenElse(hn::Or(Better<kMax, D>(x, acc), hn::IsNaN(x)), x, acc);
}

template <bool kMax>
inline double StepScalar(double acc, double x) {
  return (kMax ? x > acc : x < acc) || std::isnan(x) ? x : acc;
}

// Max (or min) of x[0, n) (or of |x|), NaN if any element is NaN.
template <class T, bool kMax, bool kAbs>
HWY_INLINE double RowExtremeValue(const T* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const T identity = kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  const auto init = hn::Set(d, identity);
  auto a0 = init, a1 = init, a2 = init, a3 = init;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = Step<kMax, decltype(d)>(a0, Load<kAbs>(d, x + i));
    a1 = Step<kMax, decltype(d)>(a1, Load<kAbs>(d, x + i + N));
    a2 = Step<kMax, decltype(d)>(a2, Load<kAbs>(d, x + i + 2 * N));
    a3 = Step<kMax, decltype(d)>(a3, Load<kAbs>(d, x + i + 3 * N));
  }
  for (; i + N <= n; i += N) a0 = Step<kMax, decltype(d)>(a0, Load<kAbs>(d, x + i));
  HWY_ALIGN T lanes[4 * HWY_LANES(T)];
  hn::Store(a0, d, lanes);
  hn::Store(a1, d, lanes + N);
  hn::Store(a2, d, lanes + 2 * N);
  hn::Store(a3, d, lanes + 3 * N);
  double result = static_cast<double>(identity);
  for (size_t l = 0; l < 4 * N; ++l) result = StepScalar<kMax>(result, static_cast<double>(lanes[l]));
  for (; i < n; ++i) result = StepScalar<kMax>(result, static_cast<double>(kAbs ? std::abs(x[i]) : x[i]));
  return result;
}

template <class T, bool kMax, bool kAbs>
void RowExtreme(const void* x, int64_t n, int64_t, const ReduceParams&, ReducePartial* out) {
  *out = ReducePartial{};
  out->v[0] = RowExtremeValue<T, kMax, kAbs>(static_cast<const T*>(x), static_cast<size_t>(n));
}

// Two passes over the block (in cache for the second): the extreme value, then the
// first position holding it (or the first NaN).
template <class T, bool kMax>
void RowArgExtreme(const void* xv, int64_t n_, int64_t index0, const ReduceParams&, ReducePartial* out) {
  const T* x = static_cast<const T*>(xv);
  const size_t n = static_cast<size_t>(n_);
  const double best = RowExtremeValue<T, kMax, false>(x, n);
  const bool nan = std::isnan(best);
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto target = hn::Set(d, static_cast<T>(best));
  size_t found = n;
  size_t i = 0;
  for (; i + N <= n && found == n; i += N) {
    const auto v = hn::LoadU(d, x + i);
    const intptr_t pos = hn::FindFirstTrue(d, nan ? hn::IsNaN(v) : hn::Eq(v, target));
    if (pos >= 0) found = i + static_cast<size_t>(pos);
  }
  for (; i < n && found == n; ++i) {
    if (nan ? std::isnan(x[i]) : static_cast<double>(x[i]) == best) found = i;
  }
  *out = ReducePartial{};
  out->v[0] = static_cast<double>(x[found]);
  out->index = index0 + static_cast<int64_t>(found);
}

// ---- columns (groups: reduce_columns-inl.h) ----
template <class T, bool kMax, bool kAbs>
void ColumnExtreme(const void* const* rows_v, int64_t nrows, int64_t w, int64_t, const ReduceParams&,
                   ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  ForColumnGroups<T>(static_cast<size_t>(w), [&](auto d, auto groups, size_t c) {
    using D = decltype(d);
    constexpr size_t G = decltype(groups)::value;
    const size_t N = hn::Lanes(d);
    hn::Vec<D> acc[G];
    for (size_t g = 0; g < G; ++g) acc[g] = Load<kAbs>(d, rows[0] + c + g * N);
    for (int64_t r = 1; r < nrows; ++r) {
      for (size_t g = 0; g < G; ++g) acc[g] = Step<kMax, D>(acc[g], Load<kAbs>(d, rows[r] + c + g * N));
    }
    ScatterLanes(d, acc, out + c, [](ReducePartial& p, double v) {
      p = ReducePartial{};
      p.v[0] = v;
    });
  });
}

// Per lane: the best value so far and the row it came from (counted in T lanes, exact
// since nrows <= kColumnBlockRows). A row replaces the best when strictly better, or
// NaN while the best is not, so the first of equal values and the first NaN stay.
template <class T, bool kMax>
void ColumnArgExtreme(const void* const* rows_v, int64_t nrows, int64_t w, int64_t index0, const ReduceParams&,
                      ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  KILN_CHECK(nrows <= kColumnBlockRows, "reduce", "column block of {} rows is too tall", nrows);
  ForColumnGroups<T>(static_cast<size_t>(w), [&](auto d, auto groups, size_t c) {
    using D = decltype(d);
    constexpr size_t G = decltype(groups)::value;
    const size_t N = hn::Lanes(d);
    hn::Vec<D> best[G], row[G];
    for (size_t g = 0; g < G; ++g) {
      best[g] = hn::LoadU(d, rows[0] + c + g * N);
      row[g] = hn::Zero(d);
    }
    for (int64_t r = 1; r < nrows; ++r) {
      const auto r_vec = hn::Set(d, static_cast<T>(r));
      for (size_t g = 0; g < G; ++g) {
        const auto x = hn::LoadU(d, rows[r] + c + g * N);
        const auto take = hn::Or(Better<kMax, D>(x, best[g]), hn::AndNot(hn::IsNaN(best[g]), hn::IsNaN(x)));
        best[g] = hn::IfThenElse(take, x, best[g]);
        row[g] = hn::IfThenElse(take, r_vec, row[g]);
      }
    }
    ScatterLanes(d, best, out + c, [](ReducePartial& p, double v) {
      p = ReducePartial{};
      p.v[0] = v;
    });
    // Row numbers are exact in T lanes and so in double.
    ScatterLanes(d, row, out + c, [index0](ReducePartial& p, double r) { p.index = index0 + static_cast<int64_t>(r); });
  });
}

template <class T>
ReduceKernel MinMaxFamily(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Max:
      return {&RowExtreme<T, true, false>, &ColumnExtreme<T, true, false>, &combine_max};
    case ReduceKind::Min:
      return {&RowExtreme<T, false, false>, &ColumnExtreme<T, false, false>, &combine_min};
    case ReduceKind::MaxAbs:
      return {&RowExtreme<T, true, true>, &ColumnExtreme<T, true, true>, &combine_max};
    case ReduceKind::MinAbs:
      return {&RowExtreme<T, false, true>, &ColumnExtreme<T, false, true>, &combine_min};
    case ReduceKind::ArgMax:
      return {&RowArgExtreme<T, true>, &ColumnArgExtreme<T, true>, &combine_argmax};
    case ReduceKind::ArgMin:
      return {&RowArgExtreme<T, false>, &ColumnArgExtreme<T, false>, &combine_argmin};
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, reduce_kind_name(kind), "no min/max kernel for {} inputs",
       sizeof(T) == 4 ? "float32" : "float64");
}

ReduceKernel MinMaxFamilyF32(ReduceKind kind) { return MinMaxFamily<float>(kind); }
ReduceKernel MinMaxFamilyF64(ReduceKind kind) { return MinMaxFamily<double>(kind); }

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(MinMaxFamilyF32);
HWY_EXPORT(MinMaxFamilyF64);

ReduceKernel reduce_minmax_kernels_f32(ReduceKind kind) { return HWY_DYNAMIC_DISPATCH(MinMaxFamilyF32)(kind); }
ReduceKernel reduce_minmax_kernels_f64(ReduceKind kind) { return HWY_DYNAMIC_DISPATCH(MinMaxFamilyF64)(kind); }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
