// Float32/float64 transcendental unary kernels: exp, exp2, expm1, log, log2, log1p,
// sin, cos, tanh (from elementwise_math-inl.h) and the activations built on them
// (sigmoid, silu, gelu, softplus). Highway SIMD, compiled once per target. Error
// budgets per op are derived in tests/cpp/test_elementwise_unary.cpp.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/elementwise/unary_math_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/elementwise/elementwise_kernels.h"
#include "backend/cpu/elementwise/elementwise_math-inl.h"
#include "backend/cpu/elementwise/elementwise_simd-inl.h"
#include "backend/cpu/elementwise/stateless_unary_op.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {

// Horner's rule; c[0] is the highest-degree coefficient.
template <class D, class V, typename C, size_t N>
HWY_INLINE V Horner(D d, V y, const C (&c)[N]) {
  using T = hn::TFromD<D>;
  V acc = hn::Set(d, T(c[0]));
  for (size_t i = 1; i < N; ++i) acc = hn::MulAdd(acc, y, hn::Set(d, T(c[i])));
  return acc;
}

// Q(y) with erfc(z) = t * exp(-z^2) * Q(y), t = 2 / (2 + z), y = 2t - 1 = (2 - z) / (2 + z),
// for z >= 0. This is Numerical Recipes' (3rd ed., §6.2.2, "Erf") change of variable
// t = 2 / (2 + z), which makes erfc(z) * exp(z^2) / t smooth on the whole of z in
// [0, inf) (t in (0, 1]); its Chebyshev series in y, truncated and converted to monomials
// (with mpmath at 50 digits), has max relative error 1.7e-9 at degree 12 (for float32)
// and 3.4e-18 at degree 28 (for float64), and sum |coefficients| = 1.03, so Horner's
// rule adds only a couple of rounding errors.
constexpr float kErfcQ12[] = {
    -8.50886990031912612698e-6f, -1.32739551767619200368e-6f, 6.7687806897345184758e-5f,
    -3.29515392701853261769e-5f, -3.28100147985141531385e-4f, 4.27020150762249920039e-4f,
    1.54404768308925058605e-3f,  -3.24185489536750420494e-3f, -1.07551161527546402106e-2f,
    1.82213842457571066067e-2f,  1.39736032661886565329e-1f,  3.43580332970096362957e-1f,
    5.10791352761223577844e-1f,
};
constexpr double kErfcQ28[] = {
    -2.05682509085024144887e-10, -3.38886955463086884912e-10, 2.64494416318353268432e-9,
    1.22845363501865661003e-9,   -1.42440615121671609664e-8,  6.35386466950513921659e-9,
    3.73207064348813074966e-8,   -5.76014669717562450108e-8,  -1.165860859319608351e-8,
    1.64911631111846329142e-7,   -2.77320078572709637473e-7,  -3.05871964567470974636e-9,
    9.96150026102389590656e-7,   -1.82080783840298215164e-6,  -5.60870342432345310962e-7,
    8.06004049102814624792e-6,   -1.08486107624814463648e-5,  -1.70743365307357001056e-5,
    7.22354574289379572816e-5,   -1.71857375945489391071e-5,  -3.3153676097127950799e-4,
    4.18648033296486808701e-4,   1.5453060300572451169e-3,    -3.23959253398651317252e-3,
    -1.07553309447554108094e-2,  1.82211157534424967323e-2,   1.39736046278027492027e-1,
    3.43580342206905273042e-1,   5.10791352621011487566e-1,
};

// gelu(x) = x * Phi(x), Phi the standard normal CDF, Phi(x) = erfc(-x / sqrt(2)) / 2,
// for non-NaN x. The tail Phi(-|x|) = t Q(y) exp(-x^2/2) / 2 is computed for every x,
// so no branch loses relative accuracy to cancellation (1 + erf(x) for negative x
// would). x^2/2 is taken from x itself, split exactly into hi + lo (Dekker's product on
// a half-width split of |x|): rounding x^2 first would cost x^2/2 * eps of relative
// error in exp(-x^2/2). For x < 0 the Gaussian factor is applied last, so that x * Phi(x)
// stays normal where Phi(x) alone would already be subnormal (x < -13 in float32).
template <class D, class V>
HWY_INLINE V GeluOf(D d, V x) {
  using T = hn::TFromD<D>;
  using TU = hwy::MakeUnsigned<T>;
  const hn::RebindToUnsigned<D> du;
  constexpr bool kF32 = sizeof(T) == 4;
  const V one = One(d);
  const V two = hn::Set(d, T(2));
  const V half = hn::Set(d, T(0.5));
  // Beyond 15 (f32) / 40 (f64) the tail underflows to 0 anyway.
  const V ax = hn::Min(hn::Abs(x), hn::Set(d, kF32 ? T(15) : T(40)));
  const V z = hn::Mul(ax, hn::Set(d, T(0.707106781186547524400844)));
  const V inv = hn::Div(one, hn::Add(two, z));
  const V t = hn::Add(inv, inv);
  const V y = hn::Mul(hn::Sub(two, z), inv);
  const V q = kF32 ? Horner(d, y, kErfcQ12) : Horner(d, y, kErfcQ28);
  // ax^2 = hi + lo: ax = ah + al with ah holding the top half of the significand, so
  // ah*ah, 2*ah*al and (to within 2^-100 relative for f64) al*al are exact.
  const TU high_half = kF32 ? TU(0xFFFFF000u) : TU(0xFFFFFFFFF8000000ull);
  const V hi = hn::Mul(ax, ax);
  const V ah = hn::BitCast(d, hn::And(hn::BitCast(du, ax), hn::Set(du, high_half)));
  const V al = hn::Sub(ax, ah);
  const V lo = hn::Add(hn::Add(hn::Sub(hn::Mul(ah, ah), hi), hn::Mul(hn::Add(ah, ah), al)), hn::Mul(al, al));
  // exp(-(hi + lo)/2) = exp(-hi/2) * (1 - lo/2), with |lo| <= ulp(hi)/2.
  const V gauss = hn::Mul(hn::Exp(d, hn::Mul(hi, hn::Neg(half))), hn::NegMulAdd(lo, half, one));
  // x < 0: x * tail = (x * t * q / 2) * gauss; x >= 0: x * (1 - tail) (so gelu(inf) = inf).
  const V tail_scale = hn::Mul(t, hn::Mul(q, half));
  const V negative = hn::Mul(hn::Mul(x, tail_scale), gauss);
  const V positive = hn::Mul(x, hn::NegMulAdd(tail_scale, gauss, one));
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), negative, positive);
}

KILN_STATELESS_UNARY_OP(ExpOp, ExpAll(d, x))
KILN_STATELESS_UNARY_OP(Exp2Op, Exp2All(d, x))
KILN_STATELESS_UNARY_OP(Expm1Op, Expm1All(d, x))
KILN_STATELESS_UNARY_OP(LogOp, LogAll(d, x))
KILN_STATELESS_UNARY_OP(Log2Op, Log2All(d, x))
KILN_STATELESS_UNARY_OP(Log1pOp, Log1pAll(d, x))
KILN_STATELESS_UNARY_OP(SinOp, SinCosAll<true>(d, x))
KILN_STATELESS_UNARY_OP(CosOp, SinCosAll<false>(d, x))
KILN_STATELESS_UNARY_OP(TanhOp, TanhAll(d, x))
// sigmoid(x) = 1 / (1 + e^-x) = e^x / (1 + e^x), whichever keeps the exponential <= 1:
// PyTorch's 1 / (1 + e^-x) overflows e^-x below x = -88.7 (float32) and returns 0
// where the result is still representable.
template <class D, class V>
HWY_INLINE V SigmoidOf(D d, V x) {
  const V e = ExpAll(d, hn::Neg(hn::Abs(x)));
  return hn::Div(hn::IfThenElse(hn::Lt(x, hn::Zero(d)), e, One(d)), hn::Add(One(d), e));
}

KILN_STATELESS_UNARY_OP(SigmoidOp, SigmoidOf(d, x))
// x * sigmoid(x): silu(-inf) is -inf * 0 = NaN, as PyTorch's x / (1 + e^-x).
KILN_STATELESS_UNARY_OP(SiluOp, hn::Mul(x, SigmoidOf(d, x)))
KILN_STATELESS_UNARY_OP(GeluOp, hn::IfThenElse(hn::IsNaN(x), x, GeluOf(d, hn::IfThenZeroElse(hn::IsNaN(x), x))))

// gelu(approximate="tanh"): PyTorch's 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// evaluated as the equal x * sigmoid(2u), which does not cancel for negative x.
template <class D>
struct GeluTanhOp {
  using T = hn::TFromD<D>;
  D d;
  GeluTanhOp(D tag, const KernelArgs&) : d(tag) {}
  template <class V>
  HWY_INLINE V operator()(V x) const {
    const V x2 = hn::Mul(x, x);
    const V inner = hn::MulAdd(hn::Mul(hn::Set(d, T(0.044715)), x2), x, x);
    const V two_u = hn::Mul(inner, hn::Set(d, T(1.59576912160573071175)));  // 2 sqrt(2/pi)
    return hn::Mul(x, SigmoidOf(d, two_u));
  }
};

// softplus: (beta x) > threshold ? x : log1p(e^(beta x)) / beta (PyTorch's formula).
template <class D>
struct SoftplusOp {
  using T = hn::TFromD<D>;
  using V = hn::Vec<D>;
  D d;
  V beta, threshold;
  SoftplusOp(D tag, const KernelArgs& args)
      : d(tag), beta(hn::Set(tag, T(args.beta.f))), threshold(hn::Set(tag, T(args.threshold.f))) {}
  HWY_INLINE V operator()(V x) const {
    const V bx = hn::Mul(x, beta);
    const V smooth = hn::Div(Log1pAll(d, ExpAll(d, bx)), beta);
    return hn::IfThenElse(hn::Gt(bx, threshold), x, smooth);
  }
};

}  // namespace

UnaryKernel UnaryMathKernel(UnaryOp op, bool f64) {
  switch (op) {
    case UnaryOp::Exp: return PickUnary<ExpOp>(f64);
    case UnaryOp::Exp2: return PickUnary<Exp2Op>(f64);
    case UnaryOp::Expm1: return PickUnary<Expm1Op>(f64);
    case UnaryOp::Log: return PickUnary<LogOp>(f64);
    case UnaryOp::Log2: return PickUnary<Log2Op>(f64);
    case UnaryOp::Log1p: return PickUnary<Log1pOp>(f64);
    case UnaryOp::Sin: return PickUnary<SinOp>(f64);
    case UnaryOp::Cos: return PickUnary<CosOp>(f64);
    case UnaryOp::Tanh: return PickUnary<TanhOp>(f64);
    case UnaryOp::Sigmoid: return PickUnary<SigmoidOp>(f64);
    case UnaryOp::Silu: return PickUnary<SiluOp>(f64);
    case UnaryOp::Gelu: return PickUnary<GeluOp>(f64);
    case UnaryOp::GeluTanh: return PickUnary<GeluTanhOp>(f64);
    case UnaryOp::Softplus: return PickUnary<SoftplusOp>(f64);
    default: return nullptr;
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(UnaryMathKernel);

UnaryKernel float_unary_math_kernel(UnaryOp op, DType compute) {
  if (compute != DType::Float32 && compute != DType::Float64) return nullptr;
  return HWY_DYNAMIC_DISPATCH(UnaryMathKernel)(op, compute == DType::Float64);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
