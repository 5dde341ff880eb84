// Helpers shared by the attention kernels (internal; included once per Highway target
// by attention_prefill.cpp and attention_decode.cpp): widening rows of the storage
// dtype into padded compute-dtype scratch, and an exp that maps -inf to 0.

#if defined(KILN_BACKEND_CPU_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_ATTENTION_INL_H_
#undef KILN_BACKEND_CPU_ATTENTION_INL_H_
#else
#define KILN_BACKEND_CPU_ATTENTION_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/common/codecs-inl.h"
#include "backend/cpu/common/fast_exp-inl.h"
#include "kiln/int_math.h"
#include "kiln/scalar_types.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The dtype a storage type computes in: double for double, float otherwise.
template <typename T>
using AttnCompute = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename C, typename T>
HWY_INLINE C WidenScalar(T x) {
  return static_cast<C>(static_cast<float>(x));
}
template <>
HWY_INLINE double WidenScalar<double, double>(double x) {
  return x;
}
template <>
HWY_INLINE float WidenScalar<float, float>(float x) {
  return x;
}

// Converts src[0, n) to the compute dtype into dst[0, n) and zero-fills dst[n, n_pad),
// scaled by `scale` (1 for K and V, the softmax scale for Q).
template <typename T, typename C = AttnCompute<T>>
HWY_INLINE void WidenRow(const T* HWY_RESTRICT src, int64_t n, int64_t n_pad, C scale, C* HWY_RESTRICT dst) {
  const hn::ScalableTag<C> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto vscale = hn::Set(d, scale);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(codecs::LoadWidened(d, src + i), vscale), d, dst + i);
  for (; i < n; ++i) dst[i] = WidenScalar<C>(src[i]) * scale;
  for (; i < n_pad; ++i) dst[i] = C(0);
}

// Rounds a compute-dtype row to the storage dtype.
template <typename T, typename C>
HWY_INLINE void NarrowRow(const C* src, int64_t n, T* dst) {
  if constexpr (std::is_same_v<T, C>) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = T(static_cast<float>(src[i]));
  }
}

// e^x with e^-inf = 0 for float32 and float64 lanes (the float64 exp is only defined
// on a finite range).
template <class D>
HWY_INLINE hn::Vec<D> AttnExp(D d, hn::Vec<D> x) {
  if constexpr (sizeof(hn::TFromD<D>) == 4) {
    return FastExp<false>(d, x);
  } else {
    // The clamp is a select, not Max: Max may return the number for a NaN lane (the
    // scalar target does), and a NaN score must stay NaN.
    const auto tiny = hn::Lt(x, hn::Set(d, -746.0));
    return hn::IfThenZeroElse(tiny, FastExp<false>(d, hn::IfThenElse(tiny, hn::Set(d, -746.0), x)));
  }
}

// acc rows i..i+RB, vectors c..c+CV: acc = acc * alpha[i] + sum_j P(i, j) * V[j].
// RB x CV accumulators stay in registers across the key loop.
template <int RB, int CV, class D, typename C = hn::TFromD<D>>
HWY_INLINE void AccumulatePVTile(D d, const C* HWY_RESTRICT P, int64_t p_si, int64_t p_sj, int64_t n_keys,
                                 const C* HWY_RESTRICT V, int64_t v_stride, const C* alpha, C* acc,
                                 int64_t acc_stride) {
  const size_t N = hn::Lanes(d);
  hn::Vec<D> a[RB][CV];
  for (int r = 0; r < RB; ++r) {
    const auto s = hn::Set(d, alpha[r]);
    for (int c = 0; c < CV; ++c) a[r][c] = hn::Mul(hn::LoadU(d, acc + r * acc_stride + c * N), s);
  }
  for (int64_t j = 0; j < n_keys; ++j) {
    hn::Vec<D> vv[CV];
    for (int c = 0; c < CV; ++c) vv[c] = hn::LoadU(d, V + j * v_stride + c * N);
    for (int r = 0; r < RB; ++r) {
      const auto pr = hn::Set(d, P[r * p_si + j * p_sj]);
      for (int c = 0; c < CV; ++c) a[r][c] = hn::MulAdd(pr, vv[c], a[r][c]);
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int c = 0; c < CV; ++c) hn::StoreU(a[r][c], d, acc + r * acc_stride + c * N);
}

// For rows i < n_rows: acc[i][0, ev_pad) = acc[i] * alpha[i] + sum_{j < n_keys} P(i, j) V[j],
// P(i, j) at P[i * p_si + j * p_sj], V row j at V + j * ev_pad (ev_pad a lane multiple),
// acc row i at acc + i * ev_pad. This is the online softmax's rescale-and-accumulate step.
template <class D, typename C = hn::TFromD<D>>
HWY_INLINE void AccumulatePV(D d, const C* P, int64_t p_si, int64_t p_sj, int64_t n_rows, int64_t n_keys,
                             const C* V, int64_t ev_pad, const C* alpha, C* acc) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 4 <= n_rows; i += 4) {
    int64_t c = 0;
    for (; c + 4 * N <= ev_pad; c += 4 * N)
      AccumulatePVTile<4, 4>(d, P + i * p_si, p_si, p_sj, n_keys, V + c, ev_pad, alpha + i, acc + i * ev_pad + c,
                             ev_pad);
    for (; c < ev_pad; c += N)
      AccumulatePVTile<4, 1>(d, P + i * p_si, p_si, p_sj, n_keys, V + c, ev_pad, alpha + i, acc + i * ev_pad + c,
                             ev_pad);
  }
  for (; i < n_rows; ++i) {
    int64_t c = 0;
    for (; c + 4 * N <= ev_pad; c += 4 * N)
      AccumulatePVTile<1, 4>(d, P + i * p_si, p_si, p_sj, n_keys, V + c, ev_pad, alpha + i, acc + i * ev_pad + c,
                             ev_pad);
    for (; c < ev_pad; c += N)
      AccumulatePVTile<1, 1>(d, P + i * p_si, p_si, p_sj, n_keys, V + c, ev_pad, alpha + i, acc + i * ev_pad + c,
                             ev_pad);
  }
}

// Rounds n up to a multiple of the compute dtype's lane count.
template <typename C>
HWY_INLINE int64_t PadToLanes(int64_t n) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<C>()));
  return ceil_div(n, N) * N;
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // KILN_BACKEND_CPU_ATTENTION_INL_H_ toggle
