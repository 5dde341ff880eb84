// Float32/float64 unary kernels that are exact or one IEEE operation: abs, neg, sign,
// powers and reciprocals, sqrt/rsqrt, relu and the four roundings. Highway SIMD,
// compiled once per target (see elementwise_simd-inl.h for the loop skeleton).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/elementwise/unary_basic_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/elementwise/elementwise_kernels.h"
#include "backend/cpu/elementwise/elementwise_simd-inl.h"
#include "backend/cpu/elementwise/stateless_unary_op.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {

KILN_STATELESS_UNARY_OP(AbsOp, hn::Abs(x))
KILN_STATELESS_UNARY_OP(NegOp, hn::Neg(x))
// (x > 0) - (x < 0), as PyTorch: NaN gives 0 and -0.0 gives +0.0.
KILN_STATELESS_UNARY_OP(SignOp, hn::Sub(hn::IfThenElseZero(hn::Gt(x, hn::Zero(d)), One(d)),
                                        hn::IfThenElseZero(hn::Lt(x, hn::Zero(d)), One(d))))
KILN_STATELESS_UNARY_OP(SquareOp, hn::Mul(x, x))
KILN_STATELESS_UNARY_OP(CubeOp, hn::Mul(hn::Mul(x, x), x))
KILN_STATELESS_UNARY_OP(ReciprocalOp, hn::Div(One(d), x))
KILN_STATELESS_UNARY_OP(ReciprocalSquareOp, hn::Div(One(d), hn::Mul(x, x)))
KILN_STATELESS_UNARY_OP(SqrtOp, hn::Sqrt(x))
// A true division, not the ~12-bit hardware estimate: rsqrt(0) = inf, rsqrt(-0) = -inf.
KILN_STATELESS_UNARY_OP(RsqrtOp, hn::Div(One(d), hn::Sqrt(x)))
// x < 0 ? 0 : x, so NaN and -0.0 pass through (as PyTorch's clamp_min(x, 0)).
KILN_STATELESS_UNARY_OP(ReluOp, hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Zero(d), x))
KILN_STATELESS_UNARY_OP(FloorOp, FloorOf(d, x))
KILN_STATELESS_UNARY_OP(CeilOp, CeilOf(d, x))
KILN_STATELESS_UNARY_OP(RoundOp, RoundHalfEven(d, x))
KILN_STATELESS_UNARY_OP(TruncOp, TruncOf(d, x))

}  // namespace

UnaryKernel UnaryBasicKernel(UnaryOp op, bool f64) {
  switch (op) {
    case UnaryOp::Abs: return PickUnary<AbsOp>(f64);
    case UnaryOp::Neg: return PickUnary<NegOp>(f64);
    case UnaryOp::Sign: return PickUnary<SignOp>(f64);
    case UnaryOp::Square: return PickUnary<SquareOp>(f64);
    case UnaryOp::Cube: return PickUnary<CubeOp>(f64);
    case UnaryOp::Reciprocal: return PickUnary<ReciprocalOp>(f64);
    case UnaryOp::ReciprocalSquare: return PickUnary<ReciprocalSquareOp>(f64);
    case UnaryOp::Sqrt: return PickUnary<SqrtOp>(f64);
    case UnaryOp::Rsqrt: return PickUnary<RsqrtOp>(f64);
    case UnaryOp::Relu: return PickUnary<ReluOp>(f64);
    case UnaryOp::Floor: return PickUnary<FloorOp>(f64);
    case UnaryOp::Ceil: return PickUnary<CeilOp>(f64);
    case UnaryOp::Round: return PickUnary<RoundOp>(f64);
    case UnaryOp::Trunc: return PickUnary<TruncOp>(f64);
    default: return nullptr;
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(UnaryBasicKernel);

UnaryKernel float_unary_basic_kernel(UnaryOp op, DType compute) {
  if (compute != DType::Float32 && compute != DType::Float64) return nullptr;
  return HWY_DYNAMIC_DISPATCH(UnaryBasicKernel)(op, compute == DType::Float64);
}

int64_t elementwise_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
