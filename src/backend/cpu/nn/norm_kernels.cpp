// SIMD kernels of RMSNorm and LayerNorm over groups of rows (see norm_kernels.h), compiled
// once per Highway target. Tails go through a zero-padded full vector in a stack buffer,
// so every element sees the same arithmetic.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/nn/norm_kernels.cpp"
#include "backend/cpu/nn/norm_kernels.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
HWY_INLINE hn::Vec<D> LoadPadded(D d, const hn::TFromD<D>* p, size_t m) {
  using T = hn::TFromD<D>;
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)] = {};
  std::memcpy(buf, p, m * sizeof(T));
  return hn::Load(d, buf);
}

template <class D>
HWY_INLINE void StorePartial(D d, hn::Vec<D> v, hn::TFromD<D>* p, size_t m) {
  using T = hn::TFromD<D>;
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, m * sizeof(T));
}

// Sum of tr(x) over a block of at most kNormSumBlock elements, four accumulators.
template <class D, class Tr>
HWY_INLINE double BlockSum(D d, const hn::TFromD<D>* HWY_RESTRICT x, size_t n, const Tr& tr) {
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    a0 = hn::Add(a0, tr(hn::LoadU(d, x + i)));
    a1 = hn::Add(a1, tr(hn::LoadU(d, x + i + N)));
    a2 = hn::Add(a2, tr(hn::LoadU(d, x + i + 2 * N)));
    a3 = hn::Add(a3, tr(hn::LoadU(d, x + i + 3 * N)));
  }
  for (; i + N <= n; i += N) a0 = hn::Add(a0, tr(hn::LoadU(d, x + i)));
  // Padded lanes are masked out after tr ((0 - mean)^2 is not 0).
  if (i < n) a1 = hn::Add(a1, hn::IfThenElseZero(hn::FirstN(d, n - i), tr(LoadPadded(d, x + i, n - i))));
  const auto total = hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
  return static_cast<double>(hn::GetLane(hn::SumOfLanes(d, total)));
}

template <class T, class MakeTr>
double RowSumWith(const T* x, int64_t n, MakeTr make_tr) {
  const hn::ScalableTag<T> d;
  const auto tr = make_tr(d);
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kNormSumBlock) {
    const size_t m = static_cast<size_t>(n - b < kNormSumBlock ? n - b : kNormSumBlock);
    total += BlockSum(d, x + b, m, tr);
  }
  return total;
}

template <class T>
double SumSquaresImpl(const T* x, int64_t n) {
  return RowSumWith(x, n, [](auto) { return [](auto v) { return hn::Mul(v, v); }; });
}

template <class T>
double RowSumImpl(const T* x, int64_t n) {
  return RowSumWith(x, n, [](auto) { return [](auto v) { return v; }; });
}

template <class T>
double SumSquaredDeviationsImpl(const T* x, T mean, int64_t n) {
  return RowSumWith(x, n, [mean](auto d) {
    const auto vm = hn::Set(d, mean);
    return [vm](auto v) {
      const auto dev = hn::Sub(v, vm);
      return hn::Mul(dev, dev);
    };
  });
}

// y[i, i + m) = op(d, i, m) for each vector's worth (m < lanes only at the tail).
template <class T, class Op>
HWY_INLINE void MapRow(T* y, size_t n, const Op& op) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(op(d, i, N), d, y + i);
  if (i < n) StorePartial(d, op(d, i, n - i), y + i, n - i);
}

// The vector of p[i, i + m) (a full load when m is the lane count).
template <class D>
HWY_INLINE hn::Vec<D> LoadAt(D d, const hn::TFromD<D>* p, size_t i, size_t m) {
  return m == hn::Lanes(d) ? hn::LoadU(d, p + i) : LoadPadded(d, p + i, m);
}

template <class T>
void RmsNormalizeRowsImpl(const T* x, int64_t rows, int64_t cols, double eps, const T* w, T* y) {
  const size_t n = static_cast<size_t>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const T rstd = static_cast<T>(1.0 / std::sqrt(SumSquaresImpl(xr, cols) / static_cast<double>(cols) + eps));
    MapRow(y + r * cols, n, [&](auto d, size_t i, size_t m) {
      const auto v = hn::Mul(LoadAt(d, xr, i, m), hn::Set(d, rstd));
      return w ? hn::Mul(v, LoadAt(d, w, i, m)) : v;
    });
  }
}

template <class T>
void MulRowsImpl(const T* a, const T* w, T* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* ar = a + r * cols;
    MapRow(y + r * cols, static_cast<size_t>(cols),
           [&](auto d, size_t i, size_t m) { return hn::Mul(LoadAt(d, ar, i, m), LoadAt(d, w, i, m)); });
  }
}

template <class T>
void LayerNormalizeRowsImpl(const T* x, int64_t rows, int64_t cols, double eps, const T* w, const T* b, T* y) {
  const double count_inv = 1.0 / static_cast<double>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const T mean = static_cast<T>(RowSumImpl(xr, cols) * count_inv);
    const T rstd = static_cast<T>(1.0 / std::sqrt(SumSquaredDeviationsImpl(xr, mean, cols) * count_inv + eps));
    MapRow(y + r * cols, static_cast<size_t>(cols), [&](auto d, size_t i, size_t m) {
      auto v = hn::Mul(hn::Sub(LoadAt(d, xr, i, m), hn::Set(d, mean)), hn::Set(d, rstd));
      if (w) v = hn::Mul(v, LoadAt(d, w, i, m));
      if (b) v = hn::Add(v, LoadAt(d, b, i, m));
      return v;
    });
  }
}

void RmsNormalizeRowsF32(const float* x, int64_t rows, int64_t cols, double eps, const float* w, float* y) {
  RmsNormalizeRowsImpl(x, rows, cols, eps, w, y);
}
void RmsNormalizeRowsF64(const double* x, int64_t rows, int64_t cols, double eps, const double* w, double* y) {
  RmsNormalizeRowsImpl(x, rows, cols, eps, w, y);
}
void MulRowsF32(const float* a, const float* w, float* y, int64_t rows, int64_t cols) {
  MulRowsImpl(a, w, y, rows, cols);
}
void MulRowsF64(const double* a, const double* w, double* y, int64_t rows, int64_t cols) {
  MulRowsImpl(a, w, y, rows, cols);
}
void LayerNormalizeRowsF32(const float* x, int64_t rows, int64_t cols, double eps, const float* w, const float* b,
                           float* y) {
  LayerNormalizeRowsImpl(x, rows, cols, eps, w, b, y);
}
void LayerNormalizeRowsF64(const double* x, int64_t rows, int64_t cols, double eps, const double* w, const double* b,
                           double* y) {
  LayerNormalizeRowsImpl(x, rows, cols, eps, w, b, y);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(RmsNormalizeRowsF32);
HWY_EXPORT(RmsNormalizeRowsF64);
HWY_EXPORT(MulRowsF32);
HWY_EXPORT(MulRowsF64);
HWY_EXPORT(LayerNormalizeRowsF32);
HWY_EXPORT(LayerNormalizeRowsF64);

void rms_normalize_rows(const float* x, int64_t rows, int64_t cols, double eps, const float* w, float* y) {
  HWY_DYNAMIC_DISPATCH(RmsNormalizeRowsF32)(x, rows, cols, eps, w, y);
}
void rms_normalize_rows(const double* x, int64_t rows, int64_t cols, double eps, const double* w, double* y) {
  HWY_DYNAMIC_DISPATCH(RmsNormalizeRowsF64)(x, rows, cols, eps, w, y);
}
void mul_rows(const float* a, const float* w, float* y, int64_t rows, int64_t cols) {
  HWY_DYNAMIC_DISPATCH(MulRowsF32)(a, w, y, rows, cols);
}
void mul_rows(const double* a, const double* w, double* y, int64_t rows, int64_t cols) {
  HWY_DYNAMIC_DISPATCH(MulRowsF64)(a, w, y, rows, cols);
}
void layer_normalize_rows(const float* x, int64_t rows, int64_t cols, double eps, const float* w, const float* b,
                          float* y) {
  HWY_DYNAMIC_DISPATCH(LayerNormalizeRowsF32)(x, rows, cols, eps, w, b, y);
}
void layer_normalize_rows(const double* x, int64_t rows, int64_t cols, double eps, const double* w, const double* b,
                          double* y) {
  HWY_DYNAMIC_DISPATCH(LayerNormalizeRowsF64)(x, rows, cols, eps, w, b, y);
}

int64_t norm_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
