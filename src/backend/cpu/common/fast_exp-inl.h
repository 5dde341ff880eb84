// Vector exp and silu for the softmax, norm and fused-activation kernels (internal;
// included once per Highway target by the *_kernels.cpp files that define
// HWY_TARGET_INCLUDE).
//
// Why not hwy::Exp for float32: softmax is one exp per element and little else, and
// on Zen 5 the exp is bound by the FMA/multiply pipes. Highway's Exp spends 11
// multiply-class ops per vector (a degree-7 polynomial plus two multiplies to reach
// the subnormal range); the 16-lane path here spends 7: x = (k/16) ln2 + r with
// |r| <= ln2/32, 2^(k/16) = 2^(k>>4) * T[k & 15] from a one-register table
// (TableLookupLanes), e^r from a cubic, and 2^(k>>4) added into the exponent bits with
// an integer add. Measured on one Zen 5 core, the exp-and-sum pass over a 128256-float
// row: 14.3 us, vs 18.3 us with a Highway-style degree-7 polynomial. Targets with other
// lane counts use Cephes' degree-7 polynomial with the same exponent trick.
//
// Accuracy (tests compare with std::exp): within 2 ulp on [-86.6, 88.69]. Below
// -86.6 the result flushes to +0 (e^-86.6 = 2.4e-38, so the absolute error is under
// that), -inf gives +0, and with kOverflow x > 88.69 gives +inf. NaN propagates.
//
// Float64 uses Highway's Exp (1 ulp), with NaN propagated and the input clamped so its
// exponent reconstruction cannot wrap.

#if defined(KILN_BACKEND_CPU_FAST_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_FAST_EXP_INL_H_
#undef KILN_BACKEND_CPU_FAST_EXP_INL_H_
#else
#define KILN_BACKEND_CPU_FAST_EXP_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 2^(j/16), j = 0..15, rounded to float.
alignas(64) inline constexpr float kExp2Sixteenths[16] = {1.0f,
                                                          1.0442737340927124f,
                                                          1.0905077457427979f,
                                                          1.1387885808944702f,
                                                          1.1892070770263672f,
                                                          1.2418577671051025f,
                                                          1.2968395948410034f,
                                                          1.3542555570602417f,
                                                          1.4142135381698608f,
                                                          1.4768261909484863f,
                                                          1.5422108173370361f,
                                                          1.610490322113037f,
                                                          1.6817928552627563f,
                                                          1.7562521696090698f,
                                                          1.8340080976486206f,
                                                          1.9152065515518188f};

// Below this e^x flushes to 0: the exponent add below would leave the normal range.
inline constexpr float kExpFlushBelow = -86.6f;
// Above this (kOverflow) e^x is +inf: past it the exponent add would overflow.
inline constexpr float kExpOverflowAbove = 88.69f;

// 16 / ln2, and 1.5 * 2^23: m = x * kExpScale16 + kExpMagic rounds x * 16/ln2 to the
// integer k and leaves k in m's low mantissa bits (two's complement), so integer shifts
// of m's bits give k's parts.
inline constexpr float kExpScale16 = 23.083120346069336f;
inline constexpr float kExpMagic = 12582912.0f;

// The 16-lane e^x from x and m = round(x * kExpScale16) + kExpMagic (the caller's FMA;
// see ShiftedExp16 for why it is separate). Flushes below kExpFlushBelow.
template <class D>
HWY_INLINE hn::Vec<D> Exp16FromRounded(D d, hn::Vec<D> x, hn::Vec<D> m) {
  const hn::RebindToSigned<D> di;
  const auto k = hn::Sub(m, hn::Set(d, kExpMagic));
  const auto mbits = hn::BitCast(di, m);
  // r = x - k ln2/16 in two FMA steps (ln2/16 split in two floats).
  auto r = hn::NegMulAdd(k, hn::Set(d, 0.04332160949707031f), x);
  r = hn::NegMulAdd(k, hn::Set(d, 8.928792283313669e-08f), r);
  // e^(k/16 ln2 + r) = T (1 + r + r^2 (1/2 + r/6)) with T = 2^(k/16) (truncation error
  // r^4/24 < 0.15 ulp for |r| <= ln2/32; 0.3 ulp at the 0.59 ln2/16 ShiftedExp16 allows):
  // r^2 and the linear factor run in parallel, shortening the dependency chain.
  const auto q = hn::MulAdd(hn::Set(d, 0.16666667163372040f), r, hn::Set(d, 0.5f));
  const auto r_plus = hn::MulAdd(hn::Mul(r, r), q, r);
  const auto table = hn::Load(d, kExp2Sixteenths);
  const auto frac = hn::TableLookupLanes(table, hn::IndicesFromVec(d, hn::And(mbits, hn::Set(di, 15))));
  // (k >> 4) << 23: the m bits above k shift out of the 32-bit lane.
  const auto exponent = hn::ShiftLeft<23>(hn::ShiftRight<4>(mbits));
  const auto y = hn::BitCast(d, hn::Add(hn::BitCast(di, hn::MulAdd(frac, r_plus, frac)), exponent));
  // A NaN compares false and keeps the NaN the arithmetic produced.
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, kExpFlushBelow)), y);
}

// e^x for float32 lanes. kOverflow: also map x > 88.69 to +inf (softmax never needs
// it: its arguments are x - max <= 0).
template <bool kOverflow, class D>
HWY_INLINE hn::Vec<D> FastExpF32(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto magic = hn::Set(d, kExpMagic);
  hn::Vec<D> y;
  if constexpr (hn::MaxLanes(D()) == 16) {
    y = Exp16FromRounded(d, x, hn::MulAdd(x, hn::Set(d, kExpScale16), magic));
  } else {
    const auto m = hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), magic);  // x / ln2
    const auto k = hn::Sub(m, magic);
    auto r = hn::NegMulAdd(k, hn::Set(d, 0.693145751953125f), x);
    r = hn::NegMulAdd(k, hn::Set(d, 1.428606765330187045e-6f), r);
    // Cephes expf: e^r = 1 + r + r^2 P(r) on |r| <= ln2 / 2.
    auto p = hn::Set(d, 1.9875691500e-4f);
    p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
    p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
    p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
    p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
    p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
    const auto er = hn::Add(hn::MulAdd(p, hn::Mul(r, r), r), hn::Set(d, 1.0f));
    const auto exponent = hn::ShiftLeft<23>(hn::BitCast(di, m));
    y = hn::BitCast(d, hn::Add(hn::BitCast(di, er), exponent));
    y = hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, kExpFlushBelow)), y);
  }
  if constexpr (kOverflow) y = hn::IfThenElse(hn::Gt(x, hn::Set(d, kExpOverflowAbove)), hn::Inf(d), y);
  return y;
}

// e^(x - shift) on 16 float32 lanes for a shift on the grid I / kExpScale16 (I an
// integer): x * S + (magic - I) rounds (x - shift) * S straight from x, so the FMA runs
// beside the subtraction instead of after it: the softmax's exp pass over half a
// 128256-float row went from 8.9 to 8.3 us on one Zen 5 core.
// The shift itself is float(I / S), off the grid by at most half its ulp, which moves
// k by at most 0.09 for |shift| < 2^16 (|r| <= 0.59 ln2/16, still within the cubic's
// accuracy). GridShift picks I; larger shifts take the plain path.
template <class D>
struct ShiftedExp16 {
  hn::Vec<D> shift;
  hn::Vec<D> bias;  // magic - I
  HWY_INLINE hn::Vec<D> operator()(D d, hn::Vec<D> x) const {
    return Exp16FromRounded(d, hn::Sub(x, shift), hn::MulAdd(x, hn::Set(d, kExpScale16), bias));
  }
};

// The grid shift nearest `shift` and its bias, or false when |shift| >= 2^16 (or it is
// not finite) and the plain path must be used.
inline bool GridShift(float shift, float* grid_shift, float* bias) {
  if (!(shift > -65536.0f && shift < 65536.0f)) return false;
  const double i = std::nearbyint(static_cast<double>(shift) * kExpScale16);
  *grid_shift = static_cast<float>(i / kExpScale16);
  *bias = static_cast<float>(kExpMagic - i);
  return true;
}

template <class D>
HWY_INLINE hn::Vec<D> ExpF64(D d, hn::Vec<D> x) {
  // Highway's Exp splits 2^n into two factors, so |n| up to ~2000 is exact; 710 is
  // already past overflow (e^710 = inf) and keeps n inside that.
  const auto clamped = hn::Min(x, hn::Set(d, 710.0));
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Exp(d, clamped));
}

// e^x for float32 or float64 lanes (see above).
template <bool kOverflow, class D>
HWY_INLINE hn::Vec<D> FastExp(D d, hn::Vec<D> x) {
  if constexpr (sizeof(hn::TFromD<D>) == 4) {
    return FastExpF32<kOverflow>(d, x);
  } else {
    return ExpF64(d, x);
  }
}

// silu(x) = x / (1 + e^-x); x very negative gives -0 (e^-x = inf), like PyTorch.
template <class D>
HWY_INLINE hn::Vec<D> Silu(D d, hn::Vec<D> x) {
  const auto one = hn::Set(d, hn::TFromD<D>(1));
  return hn::Div(x, hn::Add(one, FastExp<true>(d, hn::Neg(x))));
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // KILN_BACKEND_CPU_FAST_EXP_INL_H_ toggle
