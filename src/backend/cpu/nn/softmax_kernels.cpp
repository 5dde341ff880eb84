// SIMD kernels of softmax / log_softmax (see softmax_kernels.h for the blocked
// two-call scheme), compiled once per Highway target.
//
// Each loop keeps four independent vectors in flight so the exp's FMA chains and the
// adds overlap. Tails go through a padded full vector in a stack buffer, so every
// element sees the same arithmetic.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/nn/softmax_kernels.cpp"
#include "backend/cpu/nn/softmax_kernels.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/cpu/common/fast_exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// x[0, m), m < lanes, as a vector whose other lanes are `fill`.
template <class D>
HWY_INLINE hn::Vec<D> LoadTail(D d, const hn::TFromD<D>* x, size_t m, hn::TFromD<D> fill) {
  using T = hn::TFromD<D>;
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)];
  for (size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = fill;
  std::memcpy(buf, x, m * sizeof(T));
  return hn::Load(d, buf);
}

template <class D>
HWY_INLINE void StoreTail(D d, hn::Vec<D> v, hn::TFromD<D>* y, size_t m) {
  using T = hn::TFromD<D>;
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)];
  hn::Store(v, d, buf);
  std::memcpy(y, buf, m * sizeof(T));
}

template <class T>
T RowMaxImpl(const T* x, int64_t n_) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d), n = static_cast<size_t>(n_);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  auto m0 = hn::Set(d, neg_inf), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    m0 = hn::Max(m0, hn::LoadU(d, x + i));
    m1 = hn::Max(m1, hn::LoadU(d, x + i + N));
    m2 = hn::Max(m2, hn::LoadU(d, x + i + 2 * N));
    m3 = hn::Max(m3, hn::LoadU(d, x + i + 3 * N));
  }
  for (; i + N <= n; i += N) m0 = hn::Max(m0, hn::LoadU(d, x + i));
  if (i < n) m1 = hn::Max(m1, LoadTail(d, x + i, n - i, neg_inf));
  const auto m = hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

template <class D>
HWY_INLINE double LaneSum(D d, hn::Vec<D> v) {
  return static_cast<double>(hn::GetLane(hn::SumOfLanes(d, v)));
}

// e^(x - shift) through the general exp.
template <class D>
struct PlainShiftedExp {
  hn::Vec<D> shift;
  HWY_INLINE hn::Vec<D> operator()(D d, hn::Vec<D> x) const { return FastExp<false>(d, hn::Sub(x, shift)); }
};

// The reference a piece's exps are taken against for running max `running`: the
// running max itself, or on 16-lane float32 targets the nearest grid shift of
// ShiftedExp16 (within ln2/32 of it; any reference >= max - ln2/32 keeps e^(x - ref)
// <= 1.03 and the result exact up to rounding, as finish rescales by e^(ref - M)).
template <class T>
struct ExpReference {
  T ref;
  T bias;
  bool grid;
};
template <class T>
ExpReference<T> ReferenceFor(T running) {
  if constexpr (std::is_same_v<T, float> && hn::MaxLanes(hn::ScalableTag<float>()) == 16) {
    float grid_shift, bias;
    if (GridShift(running, &grid_shift, &bias)) return {grid_shift, bias, true};
  }
  return {running, T(0), false};
}

// One chunk of at most kSoftmaxBlock elements; exp(d, v) gives e^(v - reference).
template <class D, bool kStore, class ExpFn>
HWY_INLINE double ExpSumBlock(D d, const hn::TFromD<D>* HWY_RESTRICT x, const ExpFn& exp, hn::TFromD<D>* y, size_t n) {
  using T = hn::TFromD<D>;
  const size_t N = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  // Eight vectors per iteration: enough independent exps to keep the FMA pipes busy
  // (measured ~6% faster than four on Zen 5).
  // (Named vectors, not an array: sizeless SVE/RVV vectors cannot form arrays.)
  auto exp_at = [&](size_t j) { return exp(d, hn::LoadU(d, x + j)); };
  for (; i + 8 * N <= n; i += 8 * N) {
    const auto e0 = exp_at(i), e1 = exp_at(i + N), e2 = exp_at(i + 2 * N), e3 = exp_at(i + 3 * N);
    const auto e4 = exp_at(i + 4 * N), e5 = exp_at(i + 5 * N), e6 = exp_at(i + 6 * N), e7 = exp_at(i + 7 * N);
    if (kStore) {
      hn::StoreU(e0, d, y + i);
      hn::StoreU(e1, d, y + i + N);
      hn::StoreU(e2, d, y + i + 2 * N);
      hn::StoreU(e3, d, y + i + 3 * N);
      hn::StoreU(e4, d, y + i + 4 * N);
      hn::StoreU(e5, d, y + i + 5 * N);
      hn::StoreU(e6, d, y + i + 6 * N);
      hn::StoreU(e7, d, y + i + 7 * N);
    }
    s0 = hn::Add(s0, hn::Add(e0, e4));
    s1 = hn::Add(s1, hn::Add(e1, e5));
    s2 = hn::Add(s2, hn::Add(e2, e6));
    s3 = hn::Add(s3, hn::Add(e3, e7));
  }
  for (; i + N <= n; i += N) {
    const auto e = exp_at(i);
    if (kStore) hn::StoreU(e, d, y + i);
    s0 = hn::Add(s0, e);
  }
  if (i < n) {
    // -inf padding: e^(-inf - reference) is 0 (or NaN when the reference is NaN, and
    // then the real lanes are NaN too).
    const auto e = exp(d, LoadTail(d, x + i, n - i, -std::numeric_limits<T>::infinity()));
    if (kStore) StoreTail(d, e, y + i, n - i);
    s1 = hn::Add(s1, e);
  }
  return LaneSum(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
}

template <class T, class ExpFn>
double ExpSumBlocks(const T* x, const ExpFn& exp, T* y, int64_t n) {
  const hn::ScalableTag<T> d;
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kSoftmaxBlock) {
    const size_t m = static_cast<size_t>(n - b < kSoftmaxBlock ? n - b : kSoftmaxBlock);
    total += y ? ExpSumBlock<decltype(d), true>(d, x + b, exp, y + b, m)
               : ExpSumBlock<decltype(d), false>(d, x + b, exp, nullptr, m);
  }
  return total;
}

// Sum of e^(x - reference) over x[0, n), stored to y when not null.
template <class T>
double ExpShiftedSumImpl(const T* x, const ExpReference<T>& ref, T* y, int64_t n) {
  using D = hn::ScalableTag<T>;
  const D d;
  if constexpr (std::is_same_v<T, float> && hn::MaxLanes(D()) == 16) {
    if (ref.grid) return ExpSumBlocks(x, ShiftedExp16<D>{hn::Set(d, ref.ref), hn::Set(d, ref.bias)}, y, n);
  }
  return ExpSumBlocks(x, PlainShiftedExp<D>{hn::Set(d, ref.ref)}, y, n);
}

template <class T>
void ScaleInPlace(T* y, T factor, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto f = hn::Set(d, factor);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    hn::StoreU(hn::Mul(hn::LoadU(d, y + i), f), d, y + i);
    hn::StoreU(hn::Mul(hn::LoadU(d, y + i + N), f), d, y + i + N);
  }
  for (; i < n; i += N) {
    const size_t m = n - i < N ? n - i : N;
    StoreTail(d, hn::Mul(LoadTail(d, y + i, m, T(0)), f), y + i, m);
  }
}

// y = (x - shift) - log_sum, in two steps as PyTorch's log_softmax: folded into one
// constant, shift + log_sum rounds to shift once |shift| dwarfs log_sum (x near 1e38
// gave 0 instead of -log(n)).
template <class T>
void SubtractShiftThenLogSum(const T* x, T shift, T log_sum, T* y, size_t n) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, shift), vl = hn::Set(d, log_sum);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    hn::StoreU(hn::Sub(hn::Sub(hn::LoadU(d, x + i), vs), vl), d, y + i);
    hn::StoreU(hn::Sub(hn::Sub(hn::LoadU(d, x + i + N), vs), vl), d, y + i + N);
  }
  for (; i < n; i += N) {
    const size_t m = n - i < N ? n - i : N;
    StoreTail(d, hn::Sub(hn::Sub(LoadTail(d, x + i, m, T(0)), vs), vl), y + i, m);
  }
}

template <class T>
SoftmaxStats SoftmaxReduceImpl(const T* x, T* y, int64_t n, int64_t block, T* block_max) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T running = kNegInf;
  ExpReference<T> ref{kNegInf, T(0), false};
  double sum = 0.0;
  bool nan = false;
  for (int64_t b = 0, off = 0; off < n; ++b, off += block) {
    const int64_t len = n - off < block ? n - off : block;
    const T bm = RowMaxImpl(x + off, len);
    if (bm > running) {  // false for NaN: the exp sum below propagates it
      running = bm;
      // Without y (log_softmax, which needs only the sum) the reference is the max
      // itself: x - R is then PyTorch's exact x - max, and the max's own term is 1.
      const ExpReference<T> next = y != nullptr ? ReferenceFor(running) : ExpReference<T>{running, T(0), false};
      if (sum != 0.0) sum *= std::exp(static_cast<double>(ref.ref) - static_cast<double>(next.ref));
      ref = next;
    }
    block_max[b] = ref.ref;
    if (running == kNegInf) {
      // Only -inf so far (or NaNs x86's max dropped): e^(x - -inf) would be NaN either
      // way, so look for NaNs directly.
      nan = nan || std::any_of(x + off, x + off + len, [](T v) { return std::isnan(v); });
      continue;
    }
    sum += ExpShiftedSumImpl(x + off, ref, y ? y + off : nullptr, len);
  }
  return {static_cast<double>(ref.ref), nan ? std::numeric_limits<double>::quiet_NaN() : sum};
}

template <class T>
void SoftmaxFinishImpl(const T* x, T* y, int64_t n, int64_t block, const T* block_max, SoftmaxStats row, bool log) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const bool all_nan = std::isnan(row.sum) || row.max == -std::numeric_limits<double>::infinity();
  if (log) {
    SubtractShiftThenLogSum(x, static_cast<T>(all_nan ? kNaN : row.max), static_cast<T>(std::log(row.sum)), y,
                            static_cast<size_t>(n));
    return;
  }
  // The factor changes only where the running max rose, so reuse it in between.
  T last_ref = kNegInf;
  T factor = T(0);
  bool have_factor = false;
  for (int64_t b = 0, off = 0; off < n; ++b, off += block) {
    const size_t len = static_cast<size_t>(n - off < block ? n - off : block);
    const T ref = block_max[b];
    if (all_nan || ref == kNegInf) {
      std::fill(y + off, y + off + len, all_nan ? static_cast<T>(kNaN) : T(0));
      continue;
    }
    if (!have_factor || ref != last_ref) {
      factor = static_cast<T>(std::exp(static_cast<double>(ref) - row.max) / row.sum);
      last_ref = ref;
      have_factor = true;
    }
    ScaleInPlace(y + off, factor, len);
  }
}

// Columns [j, j + N) of the block (the last group padded with zeros: its extra lanes
// compute a harmless softmax of zeros that is never stored). Sums flush into double
// lanes every kSoftmaxBlock rows, like the row sums.
template <class D>
HWY_INLINE void SoftmaxColumnGroup(D d, const hn::TFromD<D>* x, hn::TFromD<D>* y, size_t dim, size_t stride,
                                   size_t width, bool log) {
  using T = hn::TFromD<D>;
  const size_t N = hn::Lanes(d);
  const bool full = width == N;
  auto load = [&](const T* p) { return full ? hn::LoadU(d, p) : LoadTail(d, p, width, T(0)); };
  auto store = [&](hn::Vec<D> v, T* p) {
    if (full) {
      hn::StoreU(v, d, p);
    } else {
      StoreTail(d, v, p, width);
    }
  };
  auto vmax = hn::Set(d, -std::numeric_limits<T>::infinity());
  for (size_t r = 0; r < dim; ++r) vmax = hn::Max(vmax, load(x + r * stride));

  HWY_ALIGN double sums[HWY_MAX_BYTES / sizeof(T)] = {};
  HWY_ALIGN T block[HWY_MAX_BYTES / sizeof(T)];
  for (size_t r0 = 0; r0 < dim; r0 += kSoftmaxBlock) {
    const size_t r1 = dim - r0 < static_cast<size_t>(kSoftmaxBlock) ? dim : r0 + kSoftmaxBlock;
    auto s = hn::Zero(d);
    for (size_t r = r0; r < r1; ++r) {
      const auto e = FastExp<false>(d, hn::Sub(load(x + r * stride), vmax));
      if (!log) store(e, y + r * stride);
      s = hn::Add(s, e);
    }
    hn::Store(s, d, block);
    for (size_t l = 0; l < N; ++l) sums[l] += static_cast<double>(block[l]);
  }

  // 1 / sum or log(sum) per lane, in double like the row path; log_softmax subtracts
  // the max and then log(sum), as the row path does.
  for (size_t l = 0; l < N; ++l) {
    block[l] = log ? static_cast<T>(std::log(sums[l])) : static_cast<T>(1.0 / sums[l]);
  }
  const auto v = hn::Load(d, block);
  for (size_t r = 0; r < dim; ++r) {
    T* p = y + r * stride;
    store(log ? hn::Sub(hn::Sub(load(x + r * stride), vmax), v) : hn::Mul(load(p), v), p);
  }
}

template <class T>
void SoftmaxColumnsImpl(const T* x, T* y, int64_t dim, int64_t row_stride, int64_t width, bool log) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d), w = static_cast<size_t>(width);
  for (size_t j = 0; j < w; j += N) {
    SoftmaxColumnGroup(d, x + j, y + j, static_cast<size_t>(dim), static_cast<size_t>(row_stride),
                       w - j < N ? w - j : N, log);
  }
}

SoftmaxStats SoftmaxReduceF32(const float* x, float* y, int64_t n, int64_t block, float* block_max) {
  return SoftmaxReduceImpl(x, y, n, block, block_max);
}
SoftmaxStats SoftmaxReduceF64(const double* x, double* y, int64_t n, int64_t block, double* block_max) {
  return SoftmaxReduceImpl(x, y, n, block, block_max);
}
void SoftmaxFinishF32(const float* x, float* y, int64_t n, int64_t block, const float* block_max, SoftmaxStats row,
                      bool log) {
  SoftmaxFinishImpl(x, y, n, block, block_max, row, log);
}
void SoftmaxFinishF64(const double* x, double* y, int64_t n, int64_t block, const double* block_max, SoftmaxStats row,
                      bool log) {
  SoftmaxFinishImpl(x, y, n, block, block_max, row, log);
}
void SoftmaxColumnsF32(const float* x, float* y, int64_t dim, int64_t stride, int64_t width, bool log) {
  SoftmaxColumnsImpl(x, y, dim, stride, width, log);
}
void SoftmaxColumnsF64(const double* x, double* y, int64_t dim, int64_t stride, int64_t width, bool log) {
  SoftmaxColumnsImpl(x, y, dim, stride, width, log);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(SoftmaxReduceF32);
HWY_EXPORT(SoftmaxReduceF64);
HWY_EXPORT(SoftmaxFinishF32);
HWY_EXPORT(SoftmaxFinishF64);
HWY_EXPORT(SoftmaxColumnsF32);
HWY_EXPORT(SoftmaxColumnsF64);

SoftmaxStats softmax_reduce(const float* x, float* y, int64_t n, int64_t block, float* block_max) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxReduceF32)(x, y, n, block, block_max);
}
SoftmaxStats softmax_reduce(const double* x, double* y, int64_t n, int64_t block, double* block_max) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxReduceF64)(x, y, n, block, block_max);
}
void softmax_finish(const float* x, float* y, int64_t n, int64_t block, const float* block_max, SoftmaxStats row,
                    bool log) {
  HWY_DYNAMIC_DISPATCH(SoftmaxFinishF32)(x, y, n, block, block_max, row, log);
}
void softmax_finish(const double* x, double* y, int64_t n, int64_t block, const double* block_max, SoftmaxStats row,
                    bool log) {
  HWY_DYNAMIC_DISPATCH(SoftmaxFinishF64)(x, y, n, block, block_max, row, log);
}
void softmax_columns(const float* x, float* y, int64_t dim, int64_t row_stride, int64_t width, bool log) {
  HWY_DYNAMIC_DISPATCH(SoftmaxColumnsF32)(x, y, dim, row_stride, width, log);
}
void softmax_columns(const double* x, double* y, int64_t dim, int64_t row_stride, int64_t width, bool log) {
  HWY_DYNAMIC_DISPATCH(SoftmaxColumnsF64)(x, y, dim, row_stride, width, log);
}

int64_t softmax_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
