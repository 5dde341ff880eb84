// Highway math helpers valid on every input (internal; included once per target by
// the kernel files that define HWY_TARGET_INCLUDE): e^x, 2^x, e^x - 1, log, log2,
// log1p, sin, cos, tanh for float32/float64 vectors.
//
// Highway 1.0.3's contrib math functions (hwy/contrib/math/math-inl.h) are accurate
// inside a documented range (Exp: 1 ulp up to x = 104 for f32 / 706 for f64; Log: 4
// ulp on positive finite input; Sin/Cos: 3 ulp on |x| <= 39000; Tanh: 4 ulp) and
// undefined outside it, where they convert out-of-range floats to int32 (undefined
// behaviour on the emulated target). So every helper here sanitises its input first
// (NaN and out-of-range lanes replaced by a harmless value) and patches the IEEE
// special values back in afterwards. Error budgets per op are derived in
// tests/cpp/test_elementwise_unary.cpp.

// Per-target include guard (Highway's pattern: the toggle flips once per target).
#if defined(KILN_BACKEND_CPU_ELEMENTWISE_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_ELEMENTWISE_MATH_INL_H_
#undef KILN_BACKEND_CPU_ELEMENTWISE_MATH_INL_H_
#else
#define KILN_BACKEND_CPU_ELEMENTWISE_MATH_INL_H_
#endif

#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <cmath>
#include <limits>

#include "backend/cpu/elementwise/elementwise_simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {

template <class D>
constexpr bool IsF32(D) {
  return sizeof(hn::TFromD<D>) == 4;
}

// x with NaN lanes replaced by 0, clamped to [lo, hi].
template <class D, class V>
HWY_INLINE V SanitizeClamp(D d, V x, double lo, double hi) {
  using T = hn::TFromD<D>;
  const V no_nan = hn::IfThenZeroElse(hn::IsNaN(x), x);
  return hn::Min(hn::Max(no_nan, hn::Set(d, T(lo))), hn::Set(d, T(hi)));
}

// e^x. Past the clamp bounds e^x already overflows to inf (or underflows to 0) inside
// Exp's valid range, so the clamp changes no result.
template <class D, class V>
HWY_INLINE V ExpAll(D d, V x) {
  const V xc = IsF32(d) ? SanitizeClamp(d, x, -110.0, 100.0) : SanitizeClamp(d, x, -1010.0, 710.0);
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Exp(d, xc));
}

// e^x - 1. Highway's Expm1 returns +0 for -0; the result always has x's sign.
template <class D, class V>
HWY_INLINE V Expm1All(D d, V x) {
  const V xc = IsF32(d) ? SanitizeClamp(d, x, -110.0, 100.0) : SanitizeClamp(d, x, -1010.0, 710.0);
  return hn::IfThenElse(hn::IsNaN(x), x, hn::CopySign(hn::Expm1(d, xc), x));
}

// 2^k for integer-valued k in the normal exponent range: k + (2^mant + bias) is an
// exact integer whose low mantissa bits are the biased exponent; shift them into place.
template <class D, class V>
HWY_INLINE V Pow2OfInteger(D d, V k) {
  using T = hn::TFromD<D>;
  const hn::RebindToUnsigned<D> du;
  constexpr int kMant = sizeof(T) == 4 ? 23 : 52;
  const V magic = hn::Set(d, sizeof(T) == 4 ? T(8388608.0 + 127) : T(4503599627370496.0 + 1023));
  return hn::BitCast(d, hn::ShiftLeft<kMant>(hn::BitCast(du, hn::Add(k, magic))));
}

// 2^x = 2^n * e^(r ln 2) with n = round(x), |r| <= 1/2: the argument handed to Exp is
// small, so its rounding costs < 0.2 ulp, and integer x gives an exact power of two.
// 2^n is applied as two factors so that n down to the subnormal range works.
template <class D, class V>
HWY_INLINE V Exp2All(D d, V x) {
  using T = hn::TFromD<D>;
  const V xc = IsF32(d) ? SanitizeClamp(d, x, -160.0, 160.0) : SanitizeClamp(d, x, -1100.0, 1100.0);
  const V n = RoundHalfEven(d, xc);
  const V frac = hn::Exp(d, hn::Mul(hn::Sub(xc, n), hn::Set(d, T(0.693147180559945309417232))));
  const V k1 = RoundHalfEven(d, hn::Mul(n, hn::Set(d, T(0.5))));
  const V k2 = hn::Sub(n, k1);
  const V y = hn::Mul(hn::Mul(frac, Pow2OfInteger(d, k1)), Pow2OfInteger(d, k2));
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// The IEEE special values of a logarithm: log(0) = -inf, log(negative) = NaN,
// log(inf) = inf, NaN stays NaN. `y` holds the result for the finite positive lanes.
template <class D, class V>
HWY_INLINE V LogSpecials(D d, V x, V y) {
  y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Neg(hn::Inf(d)), y);
  y = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::NaN(d), y);
  y = hn::IfThenElse(hn::Eq(x, hn::Inf(d)), x, y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// Finite positive x, other lanes replaced by 1.
template <class D, class V>
HWY_INLINE V PositiveFiniteOrOne(D d, V x) {
  const auto ok = hn::And(hn::Gt(x, hn::Zero(d)), hn::Lt(x, hn::Inf(d)));
  return hn::IfThenElse(ok, x, One(d));
}

template <class D, class V>
HWY_INLINE V LogAll(D d, V x) {
  return LogSpecials(d, x, hn::Log(d, PositiveFiniteOrOne(d, x)));
}

// log2(x) = e + log2(m) with x = m * 2^e, m in [sqrt(1/2), sqrt(2)): the integer part
// is exact, so powers of two give exact integers (Log(x) * log2(e) would not).
template <class D, class V>
HWY_INLINE V Log2All(D d, V x) {
  using T = hn::TFromD<D>;
  using TU = hwy::MakeUnsigned<T>;
  const hn::RebindToUnsigned<D> du;
  constexpr bool kF32 = sizeof(T) == 4;
  constexpr int kMant = kF32 ? 23 : 52;
  const V two_pow_mant = hn::Set(d, kF32 ? T(8388608.0) : T(4503599627370496.0));
  V xs = PositiveFiniteOrOne(d, x);
  // Subnormals: scale into the normal range first.
  const auto subnormal = hn::Lt(xs, hn::Set(d, std::numeric_limits<T>::min()));
  xs = hn::IfThenElse(subnormal, hn::Mul(xs, hn::Set(d, kF32 ? T(33554432.0) : T(18014398509481984.0))), xs);
  const auto bits = hn::BitCast(du, xs);
  // The exponent field as an exact float: OR it into the low bits of 2^mant.
  const V field = hn::Sub(hn::BitCast(d, hn::Or(hn::ShiftRight<kMant>(bits), hn::BitCast(du, two_pow_mant))),
                          two_pow_mant);
  const TU mant_mask = (TU{1} << kMant) - 1;
  V m = hn::BitCast(d, hn::Or(hn::And(bits, hn::Set(du, mant_mask)), hn::BitCast(du, One(d))));
  const auto above_sqrt2 = hn::Gt(m, hn::Set(d, T(1.41421356237309504880)));
  m = hn::IfThenElse(above_sqrt2, hn::Mul(m, hn::Set(d, T(0.5))), m);
  V e = hn::Sub(field, hn::Set(d, kF32 ? T(127) : T(1023)));
  e = hn::Sub(e, hn::IfThenElseZero(subnormal, hn::Set(d, T(kMant + 2))));
  e = hn::Add(e, hn::IfThenElseZero(above_sqrt2, One(d)));
  const V y = hn::MulAdd(hn::Log(d, m), hn::Set(d, T(1.44269504088896340735992)), e);
  return LogSpecials(d, x, y);
}

// log(1 + x): Highway's Log1p is valid for x > -1 (finite); -1 gives -inf.
template <class D, class V>
HWY_INLINE V Log1pAll(D d, V x) {
  const V minus_one = hn::Neg(One(d));
  const auto ok = hn::And(hn::Gt(x, minus_one), hn::Lt(x, hn::Inf(d)));
  V y = hn::Log1p(d, hn::IfThenElseZero(ok, x));
  y = hn::IfThenElse(hn::Eq(x, minus_one), hn::Neg(hn::Inf(d)), y);
  y = hn::IfThenElse(hn::Lt(x, minus_one), hn::NaN(d), y);
  y = hn::IfThenElse(hn::Eq(x, hn::Inf(d)), x, y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// sin/cos: Highway's reduction is accurate for |x| <= 39000; the rare lanes beyond
// (and inf/NaN) are recomputed with the C library. Highway's Sin(-0) is +0, where
// PyTorch (and IEEE) give -0: sin returns a zero input itself. Its float64 Cos(0) is
// 1 - 2^-53: below 2^-12 (float32) / 2^-27 (float64), x^2 / 2 is under half an ulp of
// 1, so cos is exactly 1 there.
template <bool kSin, class D, class V>
HWY_INLINE V SinCosAll(D d, V x) {
  using T = hn::TFromD<D>;
  const V limit = hn::Set(d, T(39000));
  const auto outside = hn::Not(hn::Le(hn::Abs(x), limit));
  const V xs = hn::IfThenZeroElse(outside, x);
  V y;
  if constexpr (kSin) {
    y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, hn::Sin(d, xs));
  } else {
    const V tiny = hn::Set(d, IsF32(d) ? T(1.0 / 4096) : T(1.0 / 134217728));
    y = hn::IfThenElse(hn::Lt(hn::Abs(x), tiny), One(d), hn::Cos(d, xs));
  }
  if (HWY_UNLIKELY(!hn::AllFalse(d, outside))) {
    HWY_ALIGN T xv[HWY_MAX_BYTES / sizeof(T)];
    HWY_ALIGN T yv[HWY_MAX_BYTES / sizeof(T)];
    hn::Store(x, d, xv);
    hn::Store(y, d, yv);
    for (size_t i = 0; i < hn::Lanes(d); ++i) {
      if (!(std::abs(xv[i]) <= T(39000))) yv[i] = kSin ? std::sin(xv[i]) : std::cos(xv[i]);
    }
    y = hn::Load(d, yv);
  }
  return y;
}

// tanh: |x| >= 20 rounds to +-1 in both precisions; clamping keeps Highway's internal
// expm1(2|x|) in range.
template <class D, class V>
HWY_INLINE V TanhAll(D d, V x) {
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Tanh(d, SanitizeClamp(d, x, -20.0, 20.0)));
}

}  // namespace
}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
