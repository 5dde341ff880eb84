// SIMD sum-like reductions over float32/float64: Sum (also of |x|, x^2 and x != 0, for
// norms), Prod, and MeanM2 (var/std), on contiguous rows and on blocks of columns.
// Compiled once per Highway target.
//
// Accuracy: sums are pairwise (cascade) like PyTorch's. A row is split in halves down to
// leaves of 32 vectors, each summed by 4 independent accumulators (8 adds per lane);
// columns are split by rows down to leaves of 16 rows. So the rounding error of a sum
// of n terms grows with about 8 + log2(n) additions instead of n, in the input's own
// precision (f32 accumulates in f32, as PyTorch does); lanes and partials are added in
// double.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/reduce/reduce_kernels_sum.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/reduce/reduce_columns-inl.h"
#include "backend/cpu/reduce/reduce_kernels.h"
#include "kiln/error.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- per-element transforms applied before summing ----
// Each is called as tr(d, x, g), g being the accumulator group (used by per-column
// means), and tr.at(column) rebinds it to a column offset.
struct Identity {
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D, hn::Vec<D> x, size_t) const { return x; }
  Identity at(size_t) const { return *this; }
};
struct AbsValue {
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D, hn::Vec<D> x, size_t) const { return hn::Abs(x); }
  AbsValue at(size_t) const { return *this; }
};
struct Square {
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D, hn::Vec<D> x, size_t) const { return hn::Mul(x, x); }
  Square at(size_t) const { return *this; }
};
// 1 where x != 0, else 0. NaN counts, as in PyTorch; hn::Ne is an ordered compare
// (false for NaN), so this is "not equal to 0" instead.
struct NonZero {
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D d, hn::Vec<D> x, size_t) const {
    return hn::IfThenZeroElse(hn::Eq(x, hn::Zero(d)), hn::Set(d, 1));
  }
  NonZero at(size_t) const { return *this; }
};
// x - mean (or its square) with one mean for every lane: a row.
template <class T, bool kSquare>
struct RowDeviation {
  T mean;
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D d, hn::Vec<D> x, size_t) const {
    const auto dev = hn::Sub(x, hn::Set(d, mean));
    return kSquare ? hn::Mul(dev, dev) : dev;
  }
  RowDeviation at(size_t) const { return *this; }
};
// x - mean[column] (or its square): a block of columns, means[] indexed by column.
template <class T, bool kSquare>
struct ColumnDeviation {
  const T* means;
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D d, hn::Vec<D> x, size_t g) const {
    const auto dev = hn::Sub(x, hn::LoadU(d, means + g * hn::Lanes(d)));
    return kSquare ? hn::Mul(dev, dev) : dev;
  }
  ColumnDeviation at(size_t column) const { return {means + column}; }
};

// The m < N elements at p as a vector, transformed, with the other lanes `fill`.
template <class D, class Tr>
HWY_INLINE hn::Vec<D> PartialVector(D d, const hn::TFromD<D>* p, size_t m, const Tr& tr, size_t g,
                                    hn::Vec<D> fill) {
  using T = hn::TFromD<D>;
  HWY_ALIGN T buf[HWY_LANES(T)] = {};
  std::memcpy(buf, p, m * sizeof(T));
  return hn::IfThenElse(hn::FirstN(d, m), tr(d, hn::LoadU(d, buf), g), fill);
}

// ---- rows ----
// Leaf of the pairwise row sum (n <= 32 vectors). Accumulator a_k takes the vectors at
// offsets 4jN + kN, the tail included, so lane l of a_k always holds positions
// congruent to kN + l modulo 4N; `even`/`odd` = a0 + a2 / a1 + a3 keep positions of one
// parity per lane pair, which is what lets complex rows be summed as interleaved reals.
template <class D, class Tr>
HWY_INLINE void RowSumLeaf(D d, const hn::TFromD<D>* HWY_RESTRICT x, size_t n, const Tr& tr, hn::Vec<D>& even,
                           hn::Vec<D>& odd) {
  const size_t N = hn::Lanes(d);
  const auto zero = hn::Zero(d);
  hn::Vec<D> a0 = zero, a1 = zero, a2 = zero, a3 = zero;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Add(a0, tr(d, hn::LoadU(d, x + i), 0));
    a1 = hn::Add(a1, tr(d, hn::LoadU(d, x + i + N), 0));
    a2 = hn::Add(a2, tr(d, hn::LoadU(d, x + i + 2 * N), 0));
    a3 = hn::Add(a3, tr(d, hn::LoadU(d, x + i + 3 * N), 0));
  }
  const size_t rem = n - i;
  auto tail = [&](size_t k) {
    const size_t m = rem - k * N;
    return m >= N ? tr(d, hn::LoadU(d, x + i + k * N), 0) : PartialVector(d, x + i + k * N, m, tr, 0, zero);
  };
  if (rem > 0) a0 = hn::Add(a0, tail(0));
  if (rem > N) a1 = hn::Add(a1, tail(1));
  if (rem > 2 * N) a2 = hn::Add(a2, tail(2));
  if (rem > 3 * N) a3 = hn::Add(a3, tail(3));
  even = hn::Add(a0, a2);
  odd = hn::Add(a1, a3);
}

// Pairwise sum of x[0, n): halves split at multiples of 4N so every leaf starts at a
// position congruent to 0 modulo 4N.
template <class D, class Tr>
HWY_NOINLINE void RowSumRange(D d, const hn::TFromD<D>* HWY_RESTRICT x, size_t n, const Tr& tr,
                              hn::Vec<D>& even, hn::Vec<D>& odd) {
  const size_t step = 4 * hn::Lanes(d);
  if (n <= 8 * step) {
    RowSumLeaf(d, x, n, tr, even, odd);
    return;
  }
  const size_t half = (n / 2) / step * step;
  hn::Vec<D> e1, o1, e2, o2;
  RowSumRange(d, x, half, tr, e1, o1);
  RowSumRange(d, x + half, n - half, tr, e2, o2);
  even = hn::Add(e1, e2);
  odd = hn::Add(o1, o2);
}

// Sums of the even and the odd positions of a row sum, in double.
template <class D, class Tr>
HWY_INLINE void RowSumParity(const hn::TFromD<D>* x, size_t n, const Tr& tr, double sums[2]) {
  using T = hn::TFromD<D>;
  const D d;
  const size_t N = hn::Lanes(d);
  hn::Vec<D> even, odd;
  RowSumRange(d, x, n, tr, even, odd);
  HWY_ALIGN T lanes[2 * HWY_LANES(T)];
  hn::Store(even, d, lanes);
  hn::Store(odd, d, lanes + N);
  // Pairwise in registers; halving keeps each position's parity while the half is even.
  double wide[2 * HWY_LANES(T)];
  for (size_t p = 0; p < 2 * N; ++p) wide[p] = static_cast<double>(lanes[p]);
  for (size_t width = 2 * N; width > 2; width /= 2) {
    for (size_t p = 0; p < width / 2; ++p) wide[p] += wide[p + width / 2];
  }
  sums[0] = wide[0];
  sums[1] = wide[1];
}

template <class T, class Tr>
void RowSum(const void* x, int64_t n, int64_t, const ReduceParams&, ReducePartial* out) {
  double sums[2];
  RowSumParity<hn::ScalableTag<T>>(static_cast<const T*>(x), static_cast<size_t>(n), Tr(), sums);
  *out = ReducePartial{};
  out->v[0] = sums[0] + sums[1];
}

template <class T>
void RowSumPairs(const T* x, int64_t n, ReducePartial* out) {
  double sums[2];
  RowSumParity<hn::ScalableTag<T>>(x, static_cast<size_t>(n), Identity(), sums);
  *out = ReducePartial{};
  out->v[0] = sums[0];
  out->v[1] = sums[1];
}

template <class T>
void RowProd(const void* xv, int64_t n_, int64_t, const ReduceParams&, ReducePartial* out) {
  const T* x = static_cast<const T*>(xv);
  const size_t n = static_cast<size_t>(n_);
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto one = hn::Set(d, 1);
  hn::Vec<decltype(d)> a0 = one, a1 = one;
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    a0 = hn::Mul(a0, hn::LoadU(d, x + i));
    a1 = hn::Mul(a1, hn::LoadU(d, x + i + N));
  }
  for (; i < n; i += N) {
    const size_t m = n - i;
    a0 = hn::Mul(a0, m >= N ? hn::LoadU(d, x + i) : PartialVector(d, x + i, m, Identity(), 0, one));
  }
  HWY_ALIGN T lanes[2 * HWY_LANES(T)];
  hn::Store(a0, d, lanes);
  hn::Store(a1, d, lanes + N);
  double product = 1.0;
  for (size_t p = 0; p < 2 * N; ++p) product *= static_cast<double>(lanes[p]);
  *out = ReducePartial{};
  out->v[0] = product;
}

// Two-pass variance state of a row block (the block is in cache for the second pass):
// mean first, then the squared deviations from it, corrected by the deviations' sum.
template <class T>
void RowMeanM2(const void* xv, int64_t n_, int64_t, const ReduceParams&, ReducePartial* out) {
  using D = hn::ScalableTag<T>;
  const T* x = static_cast<const T*>(xv);
  const size_t n = static_cast<size_t>(n_);
  const double count = static_cast<double>(n);
  double s[2], dev[2], sq[2];
  RowSumParity<D>(x, n, Identity(), s);
  const T mean = static_cast<T>((s[0] + s[1]) / count);
  RowSumParity<D>(x, n, RowDeviation<T, false>{mean}, dev);
  RowSumParity<D>(x, n, RowDeviation<T, true>{mean}, sq);
  const double dev_sum = dev[0] + dev[1];
  double m2 = (sq[0] + sq[1]) - dev_sum * dev_sum / count;
  if (m2 < 0) m2 = 0;  // rounding; NaN stays NaN
  *out = ReducePartial{};
  out->count = n_;
  out->v[0] = static_cast<double>(mean) + dev_sum / count;
  out->m2 = m2;
}

// ---- columns (groups: reduce_columns-inl.h) ----
// Pairwise sum over rows of G vectors of columns starting at `column`.
template <class D, size_t G, class Tr>
HWY_NOINLINE void ColumnSumRange(D d, const hn::TFromD<D>* const* rows, size_t nrows, size_t column, const Tr& tr,
                                 hn::Vec<D> (&acc)[G]) {
  const size_t N = hn::Lanes(d);
  if (nrows <= 16) {
    for (size_t g = 0; g < G; ++g) acc[g] = hn::Zero(d);
    for (size_t r = 0; r < nrows; ++r) {
      const hn::TFromD<D>* p = rows[r] + column;
      for (size_t g = 0; g < G; ++g) acc[g] = hn::Add(acc[g], tr(d, hn::LoadU(d, p + g * N), g));
    }
    return;
  }
  const size_t half = nrows / 2;
  hn::Vec<D> second[G];
  ColumnSumRange(d, rows, half, column, tr, acc);
  ColumnSumRange(d, rows + half, nrows - half, column, tr, second);
  for (size_t g = 0; g < G; ++g) acc[g] = hn::Add(acc[g], second[g]);
}

template <class T, class Tr>
void ColumnSum(const void* const* rows_v, int64_t nrows, int64_t w, int64_t, const ReduceParams&,
               ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  ForColumnGroups<T>(static_cast<size_t>(w), [&](auto d, auto groups, size_t c) {
    constexpr size_t G = decltype(groups)::value;
    hn::Vec<decltype(d)> acc[G];
    ColumnSumRange(d, rows, static_cast<size_t>(nrows), c, Tr().at(c), acc);
    ScatterLanes(d, acc, out + c, [](ReducePartial& p, double v) { p = ReducePartial{}; p.v[0] = v; });
  });
}

template <class T>
void ColumnProd(const void* const* rows_v, int64_t nrows, int64_t w, int64_t, const ReduceParams&,
                ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  ForColumnGroups<T>(static_cast<size_t>(w), [&](auto d, auto groups, size_t c) {
    constexpr size_t G = decltype(groups)::value;
    const size_t N = hn::Lanes(d);
    hn::Vec<decltype(d)> acc[G];
    for (size_t g = 0; g < G; ++g) acc[g] = hn::Set(d, 1);
    for (int64_t r = 0; r < nrows; ++r) {
      for (size_t g = 0; g < G; ++g) acc[g] = hn::Mul(acc[g], hn::LoadU(d, rows[r] + c + g * N));
    }
    ScatterLanes(d, acc, out + c, [](ReducePartial& p, double v) { p = ReducePartial{}; p.v[0] = v; });
  });
}

// Two-pass per column, as RowMeanM2.
template <class T>
void ColumnMeanM2(const void* const* rows_v, int64_t nrows, int64_t w, int64_t, const ReduceParams&,
                  ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  const size_t n = static_cast<size_t>(nrows);
  const double count = static_cast<double>(nrows);
  T means[2 * kColumnBlockWidth];
  KILN_CHECK(w <= 2 * kColumnBlockWidth, "reduce", "column block of {} is too wide", w);
  ForColumnGroups<T>(static_cast<size_t>(w), [&](auto d, auto groups, size_t c) {
    constexpr size_t G = decltype(groups)::value;
    hn::Vec<decltype(d)> acc[G];
    ColumnSumRange(d, rows, n, c, Identity(), acc);
    for (size_t g = 0; g < G; ++g) {
      hn::StoreU(hn::Div(acc[g], hn::Set(d, static_cast<T>(count))), d, means + c + g * hn::Lanes(d));
    }
  });
  ForColumnGroups<T>(static_cast<size_t>(w), [&](auto d, auto groups, size_t c) {
    constexpr size_t G = decltype(groups)::value;
    hn::Vec<decltype(d)> dev[G], sq[G];
    ColumnSumRange(d, rows, n, c, ColumnDeviation<T, false>{means + c}, dev);
    ColumnSumRange(d, rows, n, c, ColumnDeviation<T, true>{means + c}, sq);
    ScatterLanes(d, dev, out + c, [](ReducePartial& p, double v) { p = ReducePartial{}; p.v[1] = v; });
    ScatterLanes(d, sq, out + c, [](ReducePartial& p, double v) { p.m2 = v; });
  });
  for (int64_t j = 0; j < w; ++j) {
    ReducePartial& p = out[j];
    const double dev_sum = p.v[1];
    double m2 = p.m2 - dev_sum * dev_sum / count;
    if (m2 < 0) m2 = 0;
    p.count = nrows;
    p.v[0] = static_cast<double>(means[j]) + dev_sum / count;
    p.v[1] = 0.0;
    p.m2 = m2;
  }
}

template <class T>
ReduceKernel SumFamily(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum:
      return {&RowSum<T, Identity>, &ColumnSum<T, Identity>, &combine_sum};
    case ReduceKind::SumAbs:
      return {&RowSum<T, AbsValue>, &ColumnSum<T, AbsValue>, &combine_sum};
    case ReduceKind::SumSquares:
      return {&RowSum<T, Square>, &ColumnSum<T, Square>, &combine_sum};
    case ReduceKind::CountNonZero:
      return {&RowSum<T, NonZero>, &ColumnSum<T, NonZero>, &combine_sum};
    case ReduceKind::Prod:
      return {&RowProd<T>, &ColumnProd<T>, &combine_prod_real};
    case ReduceKind::MeanM2:
      // var/std accumulate in double (PyTorch's CPU Welford does too); the driver
      // widens float32 input.
      if constexpr (std::is_same_v<T, double>) return {&RowMeanM2<T>, &ColumnMeanM2<T>, &combine_mean_m2};
      break;
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, reduce_kind_name(kind), "no sum-family kernel for {} inputs",
       sizeof(T) == 4 ? "float32" : "float64");
}

ReduceKernel SumFamilyF32(ReduceKind kind) { return SumFamily<float>(kind); }
ReduceKernel SumFamilyF64(ReduceKind kind) { return SumFamily<double>(kind); }
void SumPairsF32(const float* x, int64_t n, ReducePartial* out) { RowSumPairs<float>(x, n, out); }
void SumPairsF64(const double* x, int64_t n, ReducePartial* out) { RowSumPairs<double>(x, n, out); }

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(SumFamilyF32);
HWY_EXPORT(SumFamilyF64);
HWY_EXPORT(SumPairsF32);
HWY_EXPORT(SumPairsF64);

ReduceKernel reduce_sum_kernels_f32(ReduceKind kind) { return HWY_DYNAMIC_DISPATCH(SumFamilyF32)(kind); }
ReduceKernel reduce_sum_kernels_f64(ReduceKind kind) { return HWY_DYNAMIC_DISPATCH(SumFamilyF64)(kind); }
void sum_pairs_row_f32(const float* x, int64_t n, ReducePartial* out) { HWY_DYNAMIC_DISPATCH(SumPairsF32)(x, n, out); }
void sum_pairs_row_f64(const double* x, int64_t n, ReducePartial* out) {
  HWY_DYNAMIC_DISPATCH(SumPairsF64)(x, n, out);
}
int64_t reduce_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
