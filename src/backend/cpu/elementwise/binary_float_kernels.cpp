// Float32/float64 binary kernels (add, mul, div, trunc-division, maximum, minimum,
// float32 pow) and clamp, as Highway SIMD compiled once per target; and the ones whose
// PyTorch definition is the C library's exact function (fmod-based floor division and
// remainder, float64 pow, atan2) as plain loops over it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/elementwise/binary_float_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/elementwise/elementwise_kernels.h"
#include "backend/cpu/elementwise/elementwise_math-inl.h"
#include "backend/cpu/elementwise/elementwise_simd-inl.h"
#include "backend/cpu/common/map_loops.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {

#define KILN_STATELESS_BINARY_OP(Name, expr)    \
  template <class D>                            \
  struct Name {                                 \
    D d;                                        \
    Name(D tag, const KernelArgs&) : d(tag) {}  \
    template <class V>                          \
    HWY_INLINE V operator()(V a, V b) const {   \
      return expr;                              \
    }                                           \
  };

// mul * x + add rounded once on every target. Highway's MulAdd is a plain multiply and
// add where the target has no FMA instruction (the scalar baseline), which would make
// results target-dependent (and a + 2.5 * 3e38 NaN instead of inf for a = -inf).
template <class D, class V>
HWY_INLINE V FusedMulAdd(D d, V mul, V x, V add) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulAdd(mul, x, add);
#else
  using T = hn::TFromD<D>;
  HWY_ALIGN T m[HWY_MAX_BYTES / sizeof(T)], xs[HWY_MAX_BYTES / sizeof(T)], a[HWY_MAX_BYTES / sizeof(T)];
  hn::Store(mul, d, m);
  hn::Store(x, d, xs);
  hn::Store(add, d, a);
  for (size_t i = 0; i < hn::Lanes(d); ++i) a[i] = std::fma(m[i], xs[i], a[i]);
  return hn::Load(d, a);
#endif
}

// a + alpha * b in one rounding (PyTorch fuses it the same way); alpha = 1 is a plain
// add, alpha = -1 gives a - b exactly.
template <class D>
struct AddOp {
  using V = hn::Vec<D>;
  D d;
  V alpha;
  bool unit;
  AddOp(D tag, const KernelArgs& args)
      : d(tag), alpha(hn::Set(tag, hn::TFromD<D>(args.alpha.f))), unit(args.alpha.f == 1) {}
  HWY_INLINE V operator()(V a, V b) const { return unit ? hn::Add(a, b) : FusedMulAdd(d, b, alpha, a); }
};

// Either operand NaN gives NaN (a + b is NaN then); otherwise the larger/smaller.
template <class D, class V>
HWY_INLINE auto EitherNaN(D, V a, V b) {
  return hn::Or(hn::IsNaN(a), hn::IsNaN(b));
}

KILN_STATELESS_BINARY_OP(MulOp, hn::Mul(a, b))
KILN_STATELESS_BINARY_OP(DivOp, hn::Div(a, b))
KILN_STATELESS_BINARY_OP(DivTruncOp, TruncOf(d, hn::Div(a, b)))
KILN_STATELESS_BINARY_OP(MaximumOp, hn::IfThenElse(EitherNaN(d, a, b), hn::Add(a, b), hn::Max(a, b)))
KILN_STATELESS_BINARY_OP(MinimumOp, hn::IfThenElse(EitherNaN(d, a, b), hn::Add(a, b), hn::Min(a, b)))

#undef KILN_STATELESS_BINARY_OP

// min(max(x, lo), hi): lo > hi gives hi (PyTorch), and a NaN anywhere gives NaN.
template <class D>
struct ClampOp {
  D d;
  ClampOp(D tag, const KernelArgs&) : d(tag) {}
  template <class V>
  HWY_INLINE V operator()(V x, V lo, V hi) const {
    const auto nan = hn::Or(hn::Or(hn::IsNaN(x), hn::IsNaN(lo)), hn::IsNaN(hi));
    return hn::IfThenElse(nan, hn::Add(hn::Add(x, lo), hi), hn::Min(hn::Max(x, lo), hi));
  }
};

// x^y for float64 lanes holding float32 values, with C99's special cases (Annex F.9.4.4).
// |x|^y = exp(y log|x|) in double has (4|w| + 2) 2^-52 of relative error at most
// (Log's 4 ulp and the product on w = y log|x|, Exp's 1 ulp), and |w| < 104 wherever
// the float32 result is finite and nonzero: ~3e-14, so rounding to float32 afterwards
// gives the correctly rounded result but for double-rounding ties (<= 1 ulp, as powf).
template <class DD, class V>
HWY_INLINE V PowOfFloats(DD dd, V x, V y) {
  const hn::RebindToUnsigned<DD> du;
  const V zero = hn::Zero(dd);
  const V one = One(dd);
  const V ax = hn::Abs(x);
  V r = ExpAll(dd, hn::Mul(y, LogAll(dd, ax)));
  const auto y_integer = hn::Eq(RoundHalfEven(dd, y), y);  // inf counts as an even integer
  const V half_y = hn::Mul(y, hn::Set(dd, 0.5));
  const auto y_odd = hn::AndNot(hn::Eq(RoundHalfEven(dd, half_y), half_y), y_integer);
  const auto x_sign = hn::RebindMask(dd, hn::Ne(hn::BitCast(du, hn::And(x, hn::SignBit(dd))), hn::Zero(du)));
  // A negative base (-0 and -inf included) takes an odd integer power's sign; a finite
  // negative base to a non-integer power is NaN.
  r = hn::IfThenElse(hn::And(x_sign, y_odd), hn::Neg(r), r);
  r = hn::IfThenElse(hn::And(hn::Lt(x, zero), hn::AndNot(y_integer, hn::IsFinite(x))), hn::NaN(dd), r);
  // x^0 = 1 and 1^y = 1 even for NaN; (-1)^(+-inf) = 1 (y log|x| is inf * 0 there).
  r = hn::IfThenElse(hn::And(hn::Eq(ax, one), hn::IsInf(y)), one, r);
  r = hn::IfThenElse(hn::Or(hn::Eq(y, zero), hn::Eq(x, one)), one, r);
  return r;
}

// float32 pow, computed in float64 vectors (see PowOfFloats). The narrowing is a plain
// C++ cast: Highway's emulated DemoteTo saturates inf to FLT_MAX.
void PowF32Loop(char* out_bytes, const char* a_bytes, const char* b_bytes, int64_t n, const KernelArgs&) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(double);
  float* out = reinterpret_cast<float*>(out_bytes);
  const float* a = reinterpret_cast<const float*>(a_bytes);
  const float* b = reinterpret_cast<const float*>(b_bytes);
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  HWY_ALIGN double result[kMax];
  HWY_ALIGN float tail_a[kMax] = {};
  HWY_ALIGN float tail_b[kMax] = {};
  for (int64_t i = 0; i < n; i += lanes) {
    const int64_t m = std::min(lanes, n - i);
    const float* pa = a + i;
    const float* pb = b + i;
    if (m < lanes) {
      std::memcpy(tail_a, pa, static_cast<size_t>(m) * sizeof(float));
      std::memcpy(tail_b, pb, static_cast<size_t>(m) * sizeof(float));
      pa = tail_a;
      pb = tail_b;
    }
    hn::Store(PowOfFloats(dd, hn::PromoteTo(dd, hn::LoadU(df, pa)), hn::PromoteTo(dd, hn::LoadU(df, pb))), dd,
              result);
    for (int64_t j = 0; j < m; ++j) out[i + j] = static_cast<float>(result[j]);
  }
}

}  // namespace

BinaryKernel BinaryFloatKernel(BinaryOp op, bool f64) {
  switch (op) {
    case BinaryOp::Add: return PickBinary<AddOp>(f64);
    case BinaryOp::Mul: return PickBinary<MulOp>(f64);
    case BinaryOp::Div: return PickBinary<DivOp>(f64);
    case BinaryOp::DivTrunc: return PickBinary<DivTruncOp>(f64);
    case BinaryOp::Maximum: return PickBinary<MaximumOp>(f64);
    case BinaryOp::Minimum: return PickBinary<MinimumOp>(f64);
    case BinaryOp::Pow: return f64 ? nullptr : &PowF32Loop;  // float64 pow: the C library's
    default: return nullptr;
  }
}

TernaryKernel TernaryFloatKernel(TernaryOp op, bool f64) {
  return op == TernaryOp::Clamp ? PickTernary<ClampOp>(f64) : nullptr;
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {
namespace {

// Python's float floor division, as PyTorch's div_floor_floating: from fmod, so the
// quotient is the one consistent with remainder() (a plain floor(a / b) is not:
// floor(1 / 0.1) = 10, but 1 // 0.1 = 9 because 0.1 is slightly more than a tenth).
template <typename T>
T floor_divide(T a, T b) {
  if (b == 0) return a / b;
  const T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= T(1);
  if (div == 0) return std::copysign(T(0), a / b);
  T floordiv = std::floor(div);
  if (div - floordiv > T(0.5)) floordiv += T(1);
  return floordiv;
}

// Python's float modulo: the sign of b (fmod has the sign of a).
template <typename T>
T python_remainder(T a, T b) {
  T mod = std::fmod(a, b);
  if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
  return mod;
}

template <typename T>
void div_floor_kernel(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
  map_binary<T>(out, a, b, n, floor_divide<T>);
}
template <typename T>
void remainder_kernel(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
  map_binary<T>(out, a, b, n, python_remainder<T>);
}
template <typename T>
void pow_kernel(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
  map_binary<T>(out, a, b, n, [](T x, T y) { return std::pow(x, y); });
}
template <typename T>
void atan2_kernel(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
  map_binary<T>(out, a, b, n, [](T x, T y) { return std::atan2(x, y); });
}

template <typename T>
BinaryKernel libm_kernel(BinaryOp op) {
  switch (op) {
    case BinaryOp::DivFloor: return &div_floor_kernel<T>;
    case BinaryOp::Remainder: return &remainder_kernel<T>;
    case BinaryOp::Pow: return &pow_kernel<T>;
    case BinaryOp::Atan2: return &atan2_kernel<T>;
    default: return nullptr;
  }
}

}  // namespace

HWY_EXPORT(BinaryFloatKernel);
HWY_EXPORT(TernaryFloatKernel);

BinaryKernel float_binary_kernel(BinaryOp op, DType compute) {
  if (compute != DType::Float32 && compute != DType::Float64) return nullptr;
  const bool f64 = compute == DType::Float64;
  if (BinaryKernel k = HWY_DYNAMIC_DISPATCH(BinaryFloatKernel)(op, f64)) return k;
  return f64 ? libm_kernel<double>(op) : libm_kernel<float>(op);
}

TernaryKernel float_ternary_kernel(TernaryOp op, DType compute) {
  if (compute != DType::Float32 && compute != DType::Float64) return nullptr;
  return HWY_DYNAMIC_DISPATCH(TernaryFloatKernel)(op, compute == DType::Float64);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
