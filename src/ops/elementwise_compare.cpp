// Comparisons, isnan/isinf/isfinite, logical ops, bitwise ops, where and clamp.
#include <cmath>
#include <optional>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/type_promotion.h"
#include "ops/autograd_hooks.h"
#include "core/memory_format.h"
#include "ops/elementwise_common.h"
#include "ops/op_utils.h"

namespace kiln {

namespace ew = elementwise;
using backend::BinaryOp;
using backend::TernaryOp;
using backend::UnaryOp;

namespace {

void check_operands(const char* name, const Tensor& a, const Tensor& b) {
  check_defined(a, name, "input");
  check_defined(b, name, "other");
}

// ---------------------------------------------------------------- bool-valued ops

// op(a, b) -> bool, both operands seen in the compute dtype of `promoted` (f16/bf16
// widen exactly to float32, so comparing there is comparing in `promoted`).
Tensor predicate(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, DType promoted) {
  const DType compute = compute_dtype(promoted);
  const Device device = common_device(name, {&a, &b});
  ew::require_kernel(name, device, op, compute, promoted);
  Tensor out = empty_elementwise_output(broadcast_shapes(a.sizes(), b.sizes(), name), DType::Bool, device, {&a, &b}, name);
  ew::run_binary(name, out, DType::Bool, a, b, compute, op);
  return out;
}

Tensor predicate(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  check_operands(name, a, b);
  return predicate(name, op, a, b, result_type({a, b}));
}

// The Scalar is converted to the promoted dtype first (so it rounds to bf16 for a bf16
// tensor, and -1 wraps to 255 for a uint8 one), as PyTorch's comparison ops do.
Tensor predicate(const char* name, BinaryOp op, const Tensor& a, const Scalar& b) {
  check_defined(a, name, "input");
  const DType promoted = result_type({a, b});
  return predicate(name, op, a, ew::scalar_operand(b, promoted), promoted);
}

Tensor unary_predicate(const char* name, UnaryOp op, const Tensor& x) {
  check_defined(x, name, "input");
  const DType compute = compute_dtype(x.dtype());
  ew::require_kernel(name, x.device(), op, compute, x.dtype());
  Tensor out = empty_elementwise_output(x.sizes(), DType::Bool, x.device(), {&x}, name);
  ew::run_unary(name, out, DType::Bool, x, compute, op);
  return out;
}

// ---------------------------------------------------------------- bitwise

Tensor bitwise(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, DType result) {
  const bool shift = op == BinaryOp::LeftShift || op == BinaryOp::RightShift;
  if (!is_integral(result, /*include_bool=*/!shift)) {
    fail(ErrorKind::Type, name, "expected {} tensors, got {}", shift ? "integer" : "bool or integer",
         dtype_name(result));
  }
  const Device device = common_device(name, {&a, &b});
  ew::require_kernel(name, device, op, result, result);
  Tensor out = Tensor::empty(broadcast_shapes(a.sizes(), b.sizes(), name), result, device, name);
  ew::run_binary(name, out, result, a, b, result, op);
  return out;
}

Tensor bitwise(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  check_operands(name, a, b);
  return bitwise(name, op, a, b, result_type({a, b}));
}

Tensor bitwise(const char* name, BinaryOp op, const Tensor& a, const Scalar& b) {
  check_defined(a, name, "input");
  const DType result = result_type({a, b});
  return bitwise(name, op, a, ew::scalar_operand(b, result), result);
}

// ---------------------------------------------------------------- where

Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b, DType result) {
  check_defined(cond, "where", "condition");
  KILN_CHECK_KIND(cond.dtype() == DType::Bool || cond.dtype() == DType::UInt8, Type, "where",
                  "expected condition to be a boolean tensor, but got a tensor with dtype {}",
                  dtype_name(cond.dtype()));
  const Shape shape = broadcast_shapes({cond.sizes(), a.sizes(), b.sizes()}, "where");
  // Numbers come in as 0-dim CPU tensors: the condition's device decides.
  const Device device = common_device("where", {&cond, &a, &b});
  ew::require_kernel("where", device, TernaryOp::Where, result, result);
  Tensor out = empty_elementwise_output(shape, result, device, {&cond, &a, &b}, "where");
  ew::run_ternary("where", out, result, cond, a, b, result, TernaryOp::Where);
  return out;
}

// ---------------------------------------------------------------- clamp

void check_clamp_dtype(DType result) {
  KILN_CHECK_KIND(result != DType::Bool, Type, "clamp", "not supported for bool results");
  ew::check_not_complex("clamp", result);
}

// x clamped to [lo, hi] (either may be absent, not both), all already in `result`'s
// compute dtype or convertible to it.
Tensor clamp_impl(const Tensor& x, const Tensor* lo, const Tensor* hi, DType result) {
  const DType compute = compute_dtype(result);
  // Number bounds come in as 0-dim CPU tensors: x's device decides (the out was always
  // allocated on the CPU, so a device x failed as mixed devices).
  const Device device = common_device("clamp", {&x, lo, hi});
  Tensor out;
  if (lo != nullptr && hi != nullptr) {
    ew::require_kernel("clamp", device, TernaryOp::Clamp, compute, result);
    out = empty_elementwise_output(broadcast_shapes({x.sizes(), lo->sizes(), hi->sizes()}, "clamp"), result, device,
                                   {&x, lo, hi}, "clamp");
    ew::run_ternary("clamp", out, compute, x, *lo, *hi, compute, TernaryOp::Clamp);
  } else {
    // One bound: clamp_min is maximum and clamp_max is minimum, NaN propagating alike.
    const Tensor& bound = lo != nullptr ? *lo : *hi;
    const BinaryOp op = lo != nullptr ? BinaryOp::Maximum : BinaryOp::Minimum;
    ew::require_kernel("clamp", device, op, compute, result);
    out = empty_elementwise_output(broadcast_shapes(x.sizes(), bound.sizes(), "clamp"), result, device, {&x, &bound},
                                   "clamp");
    ew::run_binary("clamp", out, compute, x, bound, compute, op);
  }
  return out;
}

bool is_nan_scalar(const Scalar& s) { return s.is_floating() && std::isnan(s.to_double()); }

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return predicate("eq", BinaryOp::Eq, a, b); }
Tensor eq(const Tensor& a, const Scalar& b) { return predicate("eq", BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return predicate("ne", BinaryOp::Ne, a, b); }
Tensor ne(const Tensor& a, const Scalar& b) { return predicate("ne", BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return predicate("lt", BinaryOp::Lt, a, b); }
Tensor lt(const Tensor& a, const Scalar& b) { return predicate("lt", BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return predicate("le", BinaryOp::Le, a, b); }
Tensor le(const Tensor& a, const Scalar& b) { return predicate("le", BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return predicate("gt", BinaryOp::Gt, a, b); }
Tensor gt(const Tensor& a, const Scalar& b) { return predicate("gt", BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return predicate("ge", BinaryOp::Ge, a, b); }
Tensor ge(const Tensor& a, const Scalar& b) { return predicate("ge", BinaryOp::Ge, a, b); }

Tensor isnan(const Tensor& x) { return unary_predicate("isnan", UnaryOp::IsNan, x); }
Tensor isinf(const Tensor& x) { return unary_predicate("isinf", UnaryOp::IsInf, x); }
Tensor isfinite(const Tensor& x) { return unary_predicate("isfinite", UnaryOp::IsFinite, x); }

Tensor logical_not(const Tensor& x) { return unary_predicate("logical_not", UnaryOp::LogicalNot, x); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return predicate("logical_and", BinaryOp::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return predicate("logical_or", BinaryOp::LogicalOr, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return predicate("logical_xor", BinaryOp::LogicalXor, a, b); }

Tensor bitwise_and(const Tensor& a, const Tensor& b) { return bitwise("bitwise_and", BinaryOp::BitwiseAnd, a, b); }
Tensor bitwise_and(const Tensor& a, const Scalar& b) { return bitwise("bitwise_and", BinaryOp::BitwiseAnd, a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return bitwise("bitwise_or", BinaryOp::BitwiseOr, a, b); }
Tensor bitwise_or(const Tensor& a, const Scalar& b) { return bitwise("bitwise_or", BinaryOp::BitwiseOr, a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return bitwise("bitwise_xor", BinaryOp::BitwiseXor, a, b); }
Tensor bitwise_xor(const Tensor& a, const Scalar& b) { return bitwise("bitwise_xor", BinaryOp::BitwiseXor, a, b); }
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b) {
  return bitwise("bitwise_left_shift", BinaryOp::LeftShift, a, b);
}
Tensor bitwise_left_shift(const Tensor& a, const Scalar& b) {
  return bitwise("bitwise_left_shift", BinaryOp::LeftShift, a, b);
}
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b) {
  return bitwise("bitwise_right_shift", BinaryOp::RightShift, a, b);
}
Tensor bitwise_right_shift(const Tensor& a, const Scalar& b) {
  return bitwise("bitwise_right_shift", BinaryOp::RightShift, a, b);
}

Tensor bitwise_not(const Tensor& x) {
  check_defined(x, "bitwise_not", "input");
  KILN_CHECK_KIND(is_integral(x.dtype(), /*include_bool=*/true), Type, "bitwise_not",
                  "expected bool or integer tensors, got {}", dtype_name(x.dtype()));
  ew::require_kernel("bitwise_not", x.device(), UnaryOp::BitwiseNot, x.dtype(), x.dtype());
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device(), "bitwise_not");
  ew::run_unary("bitwise_not", out, x.dtype(), x, x.dtype(), UnaryOp::BitwiseNot);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(where, cond, a, b);
  check_operands("where", a, b);
  return select(cond, a, b, result_type({a, b}));
}

Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  KILN_AUTOGRAD(where_scalar_other, cond, a, b);
  check_defined(a, "where", "input");
  const DType result = result_type({a, b});
  return select(cond, a, ew::scalar_operand(b, result), result);
}

Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  KILN_AUTOGRAD(where_scalar_self, cond, a, b);
  check_defined(b, "where", "other");
  const DType result = result_type({a, b});
  return select(cond, ew::scalar_operand(a, result), b, result);
}

Tensor where(const Tensor& cond, const Scalar& a, const Scalar& b) {
  const DType result = result_type({a, b});
  return select(cond, ew::scalar_operand(a, result), ew::scalar_operand(b, result), result);
}

Tensor clamp(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  KILN_AUTOGRAD(clamp_scalar, x, min, max);
  check_defined(x, "clamp", "input");
  KILN_CHECK(min || max, "clamp", "torch.clamp: At least one of 'min' or 'max' must not be None");
  const DType result = min && max ? result_type({x, *min, *max}) : result_type({x, min ? *min : *max});
  check_clamp_dtype(result);
  const DType compute = compute_dtype(result);
  std::optional<Tensor> lo, hi;
  for (const auto& [bound, operand] : {std::pair{&min, &lo}, std::pair{&max, &hi}}) {
    if (!*bound) continue;
    ew::check_scalar_fits("clamp", **bound, result);
    *operand = ew::scalar_operand(**bound, compute);
  }
  if (!(min && max) && is_nan_scalar(min ? *min : *max)) {
    // PyTorch's CPU clamp_min/clamp_max kernels (std::max(x, bound) and its SIMD twin)
    // return x when the lone scalar bound is NaN.
    Tensor out = Tensor::empty(x.sizes(), result, x.device(), "clamp");
    out.copy_(x);
    return out;
  }
  return clamp_impl(x, lo ? &*lo : nullptr, hi ? &*hi : nullptr, result);
}

Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  KILN_AUTOGRAD(clamp, x, min, max);
  check_defined(x, "clamp", "input");
  KILN_CHECK(min || max, "clamp", "torch.clamp: At least one of 'min' or 'max' must not be None");
  if (min) check_defined(*min, "clamp", "min");
  if (max) check_defined(*max, "clamp", "max");
  const DType result = min && max ? result_type({x, *min, *max}) : result_type({x, min ? *min : *max});
  check_clamp_dtype(result);
  return clamp_impl(x, min ? &*min : nullptr, max ? &*max : nullptr, result);
}

Tensor clamp_min(const Tensor& x, const Scalar& min) { return clamp(x, std::optional<Scalar>(min), std::nullopt); }
Tensor clamp_min(const Tensor& x, const Tensor& min) { return clamp(x, std::optional<Tensor>(min), std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& max) { return clamp(x, std::nullopt, std::optional<Scalar>(max)); }
Tensor clamp_max(const Tensor& x, const Tensor& max) { return clamp(x, std::nullopt, std::optional<Tensor>(max)); }

}  // namespace kiln
