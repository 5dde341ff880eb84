// Binary arithmetic: add, sub, mul, div, remainder, pow, maximum, minimum, atan2, and
// the in-place add_/sub_/mul_/div_.
//
// A Scalar operand first takes part in type promotion as a wrapped number, then
// becomes a 0-dim tensor of the compute dtype (not the result dtype: bf16_tensor * 0.1
// multiplies by float32 0.1, not by 0.1 rounded to bf16, as PyTorch's CPU kernels do).
#include <complex>
#include <optional>
#include <string_view>

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
using backend::UnaryOp;

namespace {

// out = op(a, b) in dtype `result` (into `out` when given: the in-place case).
Tensor apply_binary(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, DType result,
                    const backend::KernelArgs& args = {}, const Tensor* out = nullptr) {
  const DType compute = compute_dtype(result);
  const Device device = common_device(name, {&a, &b});
  ew::require_kernel(name, device, op, compute, result);
  Tensor dst = out != nullptr ? *out
                             : empty_elementwise_output(broadcast_shapes(a.sizes(), b.sizes(), name), result, device,
                                                        {&a, &b}, name);
  ew::run_binary(name, dst, compute, a, b, compute, op, args);
  return dst;
}

void check_operands(const char* name, const Tensor& a, const Tensor& b) {
  check_defined(a, name, "input");
  check_defined(b, name, "other");
}

// ---------------------------------------------------------------- add / sub

// PyTorch's alpha_check.
void check_alpha(const char* name, DType result, const Scalar& alpha) {
  KILN_CHECK(!alpha.is_bool() || result == DType::Bool, name, "Boolean alpha only supported for Boolean results.");
  KILN_CHECK(is_floating(result) || is_complex(result) || alpha.is_integral() || alpha.is_bool(), name,
             "For integral input tensors, argument alpha must not be a floating point number.");
  KILN_CHECK(is_complex(result) || !alpha.is_complex(), name,
             "For non-complex input tensors, argument alpha must not be a complex number.");
  ew::check_scalar_fits(name, alpha, result);
}

// PyTorch's sub_check.
void check_sub_dtypes(const char* name, DType a, DType b) {
  KILN_CHECK(a != DType::Bool || b != DType::Bool, name,
             "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
             "`logical_xor()` operator instead.");
  KILN_CHECK(a != DType::Bool && b != DType::Bool, name,
             "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
             "mask, use the `~` or `logical_not()` operator instead.");
}

backend::KernelArgs alpha_args(const Scalar& alpha, bool negate) {
  backend::KernelArgs args;
  args.alpha = negate ? ew::negated(ew::kernel_scalar(alpha)) : ew::kernel_scalar(alpha);
  return args;
}

// a + alpha*b, or a - alpha*b.
Tensor add_sub(const char* name, const Tensor& a, const Tensor& b, DType result, const Scalar& alpha, bool subtract,
               const Tensor* out = nullptr) {
  check_alpha(name, result, alpha);
  return apply_binary(name, BinaryOp::Add, a, b, result, alpha_args(alpha, subtract), out);
}

// The dtype the Scalar operand of a tensor-scalar arithmetic op is stored in.
Tensor arith_scalar(const Scalar& s, DType result) { return ew::scalar_operand(s, compute_dtype(result)); }

// ---------------------------------------------------------------- div

enum class Rounding { None, Trunc, Floor };

Rounding parse_rounding(const char* name, std::optional<std::string_view> mode) {
  if (!mode) return Rounding::None;
  if (*mode == "trunc") return Rounding::Trunc;
  if (*mode == "floor") return Rounding::Floor;
  fail(ErrorKind::Value, name, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{}'",
       *mode);
}

// True division turns integers into float32; rounded division keeps the promoted dtype.
DType div_result(DType promoted, Rounding rounding) {
  return rounding == Rounding::None ? float_result_dtype(promoted) : promoted;
}

Tensor divide(const char* name, const Tensor& a, const Tensor& b, DType result, Rounding rounding,
              const Tensor* out = nullptr) {
  if (rounding == Rounding::None) return apply_binary(name, BinaryOp::Div, a, b, result, {}, out);
  KILN_CHECK_KIND(result != DType::Bool, Type, name, "rounding division is not supported for bool tensors");
  ew::check_not_complex(name, result);
  return apply_binary(name, rounding == Rounding::Trunc ? BinaryOp::DivTrunc : BinaryOp::DivFloor, a, b, result,
                      {}, out);
}

// ---------------------------------------------------------------- pow

// The exponents PyTorch evaluates without pow(): x*x, x*x*x, sqrt, rsqrt, 1/x, 1/(x*x).
std::optional<UnaryOp> pow_shortcut(const Scalar& e) {
  if (e.is_complex() && e.to_complex().imag() != 0) return std::nullopt;
  const double v = e.to_double();
  if (v == 2) return UnaryOp::Square;
  if (v == 3) return UnaryOp::Cube;
  if (v == 0.5) return UnaryOp::Sqrt;
  if (v == -0.5) return UnaryOp::Rsqrt;
  if (v == -1) return UnaryOp::Reciprocal;
  if (v == -2) return UnaryOp::ReciprocalSquare;
  return std::nullopt;
}

void check_pow_dtype(DType result) {
  KILN_CHECK_KIND(result != DType::Bool, Type, "pow", "not supported for bool results");
}

Tensor tensor_tensor(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  check_operands(name, a, b);
  const DType result = result_type({a, b});
  KILN_CHECK_KIND(result != DType::Bool, Type, name, "not supported for bool tensors");
  return apply_binary(name, op, a, b, result);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  KILN_AUTOGRAD(add, a, b, alpha);
  check_operands("add", a, b);
  return add_sub("add", a, b, result_type({a, b}), alpha, false);
}

Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  KILN_AUTOGRAD(add_scalar, a, b, alpha);
  check_defined(a, "add", "input");
  const DType result = result_type({a, b});
  return add_sub("add", a, arith_scalar(b, result), result, alpha, false);
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  KILN_AUTOGRAD(sub, a, b, alpha);
  check_operands("sub", a, b);
  check_sub_dtypes("sub", a.dtype(), b.dtype());
  return add_sub("sub", a, b, result_type({a, b}), alpha, true);
}

Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  KILN_AUTOGRAD(sub_scalar, a, b, alpha);
  check_defined(a, "sub", "input");
  check_sub_dtypes("sub", a.dtype(), b.promotion_dtype());
  const DType result = result_type({a, b});
  return add_sub("sub", a, arith_scalar(b, result), result, alpha, true);
}

Tensor mul(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(mul, a, b);
  check_operands("mul", a, b);
  return apply_binary("mul", BinaryOp::Mul, a, b, result_type({a, b}));
}

Tensor mul(const Tensor& a, const Scalar& b) {
  KILN_AUTOGRAD(mul_scalar, a, b);
  check_defined(a, "mul", "input");
  const DType result = result_type({a, b});
  return apply_binary("mul", BinaryOp::Mul, a, arith_scalar(b, result), result);
}

Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode) {
  KILN_AUTOGRAD(div, a, b, rounding_mode);
  check_operands("div", a, b);
  const Rounding rounding = parse_rounding("div", rounding_mode);
  return divide("div", a, b, div_result(result_type({a, b}), rounding), rounding);
}

Tensor div(const Tensor& a, const Scalar& b, std::optional<std::string_view> rounding_mode) {
  KILN_AUTOGRAD(div_scalar, a, b, rounding_mode);
  check_defined(a, "div", "input");
  const Rounding rounding = parse_rounding("div", rounding_mode);
  const DType result = div_result(result_type({a, b}), rounding);
  return divide("div", a, arith_scalar(b, result), result, rounding);
}

Tensor remainder(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(remainder, a, b);
  return tensor_tensor("remainder", BinaryOp::Remainder, a, b);
}

Tensor remainder(const Tensor& a, const Scalar& b) {
  KILN_AUTOGRAD(remainder_scalar, a, b);
  check_defined(a, "remainder", "input");
  const DType result = result_type({a, b});
  KILN_CHECK_KIND(result != DType::Bool, Type, "remainder", "not supported for bool tensors");
  return apply_binary("remainder", BinaryOp::Remainder, a, arith_scalar(b, result), result);
}

Tensor remainder(const Scalar& a, const Tensor& b) {
  KILN_AUTOGRAD(remainder_scalar_tensor, a, b);
  check_defined(b, "remainder", "other");
  const DType result = result_type({a, b});
  KILN_CHECK_KIND(result != DType::Bool, Type, "remainder", "not supported for bool tensors");
  return apply_binary("remainder", BinaryOp::Remainder, arith_scalar(a, result), b, result);
}

Tensor pow(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(pow, a, b);
  return tensor_tensor("pow", BinaryOp::Pow, a, b);
}

Tensor pow(const Tensor& a, const Scalar& exponent) {
  KILN_AUTOGRAD(pow_scalar, a, exponent);
  check_defined(a, "pow", "input");
  KILN_CHECK(!(is_integral(a.dtype(), true) && exponent.tag() == Scalar::Tag::Int && exponent.to_int64() < 0), "pow",
             "Integers to negative integer powers are not allowed.");
  const DType result = result_type({a, exponent});
  // Exponents 0 and 1 (False and True too) fill or copy before any kernel, as PyTorch's
  // pow_out does: that is how bool ** True and bool ** False are defined there.
  const std::complex<double> e = exponent.to_complex();
  if (e == std::complex<double>(0)) return ones(a.sizes(), result).to(a.device());
  if (e == std::complex<double>(1)) {
    Tensor out = Tensor::empty(a.sizes(), result, a.device(), "pow");
    out.copy_(a);
    return out;
  }
  check_pow_dtype(result);
  const DType compute = compute_dtype(result);
  if (const auto shortcut = pow_shortcut(exponent)) {
    if (backend::elementwise_kernels.on(a.device(), "pow").supports_unary(*shortcut, compute)) {
      Tensor out = Tensor::empty(a.sizes(), result, a.device(), "pow");
      ew::run_unary("pow", out, compute, a, compute, *shortcut);
      return out;
    }
  }
  return apply_binary("pow", BinaryOp::Pow, a, arith_scalar(exponent, result), result);
}

Tensor pow(const Scalar& base, const Tensor& exponent) {
  KILN_AUTOGRAD(pow_scalar_base, base, exponent);
  check_defined(exponent, "pow", "exponent");
  const DType result = result_type({base, exponent});
  check_pow_dtype(result);
  return apply_binary("pow", BinaryOp::Pow, arith_scalar(base, result), exponent, result);
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(maximum, a, b);
  check_operands("maximum", a, b);
  const DType result = result_type({a, b});
  ew::check_not_complex("maximum", result);
  return apply_binary("maximum", BinaryOp::Maximum, a, b, result);
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(minimum, a, b);
  check_operands("minimum", a, b);
  const DType result = result_type({a, b});
  ew::check_not_complex("minimum", result);
  return apply_binary("minimum", BinaryOp::Minimum, a, b, result);
}

Tensor atan2(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(atan2, a, b);
  check_operands("atan2", a, b);
  const DType result = float_result_dtype(result_type({a, b}));
  ew::check_not_complex("atan2", result);
  return apply_binary("atan2", BinaryOp::Atan2, a, b, result);
}

// ---------------------------------------------------------------- in place
//
// Under autograd each records its out-of-place op on the old value as self's new
// history (KILN_INPLACE_AUTOGRAD, core/autograd_meta.h).

Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  KILN_INPLACE_AUTOGRAD(
      "add_", self, &other, [&] { add_(self, other, alpha); }, [&](const Tensor& s) { return add(s, other, alpha); });
  check_operands("add_", self, other);
  const DType result = result_type({self, other});
  ew::check_inplace("add_", self, other, result);
  add_sub("add_", self, other, result, alpha, false, &self);
  return self;
}

Tensor& add_(Tensor& self, const Scalar& other, const Scalar& alpha) {
  KILN_INPLACE_AUTOGRAD(
      "add_", self, nullptr, [&] { add_(self, other, alpha); }, [&](const Tensor& s) { return add(s, other, alpha); });
  check_defined(self, "add_", "input");
  const DType result = result_type({self, other});
  const Tensor b = arith_scalar(other, result);
  ew::check_inplace("add_", self, b, result);
  add_sub("add_", self, b, result, alpha, false, &self);
  return self;
}

Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  KILN_INPLACE_AUTOGRAD(
      "sub_", self, &other, [&] { sub_(self, other, alpha); }, [&](const Tensor& s) { return sub(s, other, alpha); });
  check_operands("sub_", self, other);
  check_sub_dtypes("sub_", self.dtype(), other.dtype());
  const DType result = result_type({self, other});
  ew::check_inplace("sub_", self, other, result);
  add_sub("sub_", self, other, result, alpha, true, &self);
  return self;
}

Tensor& sub_(Tensor& self, const Scalar& other, const Scalar& alpha) {
  KILN_INPLACE_AUTOGRAD(
      "sub_", self, nullptr, [&] { sub_(self, other, alpha); }, [&](const Tensor& s) { return sub(s, other, alpha); });
  check_defined(self, "sub_", "input");
  check_sub_dtypes("sub_", self.dtype(), other.promotion_dtype());
  const DType result = result_type({self, other});
  const Tensor b = arith_scalar(other, result);
  ew::check_inplace("sub_", self, b, result);
  add_sub("sub_", self, b, result, alpha, true, &self);
  return self;
}

Tensor& mul_(Tensor& self, const Tensor& other) {
  KILN_INPLACE_AUTOGRAD(
      "mul_", self, &other, [&] { mul_(self, other); }, [&](const Tensor& s) { return mul(s, other); });
  check_operands("mul_", self, other);
  const DType result = result_type({self, other});
  ew::check_inplace("mul_", self, other, result);
  apply_binary("mul_", BinaryOp::Mul, self, other, result, {}, &self);
  return self;
}

Tensor& mul_(Tensor& self, const Scalar& other) {
  KILN_INPLACE_AUTOGRAD(
      "mul_", self, nullptr, [&] { mul_(self, other); }, [&](const Tensor& s) { return mul(s, other); });
  check_defined(self, "mul_", "input");
  const DType result = result_type({self, other});
  const Tensor b = arith_scalar(other, result);
  ew::check_inplace("mul_", self, b, result);
  apply_binary("mul_", BinaryOp::Mul, self, b, result, {}, &self);
  return self;
}

Tensor& div_(Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode) {
  KILN_INPLACE_AUTOGRAD(
      "div_", self, &other, [&] { div_(self, other, rounding_mode); },
      [&](const Tensor& s) { return div(s, other, rounding_mode); });
  check_operands("div_", self, other);
  const Rounding rounding = parse_rounding("div_", rounding_mode);
  const DType result = div_result(result_type({self, other}), rounding);
  ew::check_inplace("div_", self, other, result);
  divide("div_", self, other, result, rounding, &self);
  return self;
}

Tensor& div_(Tensor& self, const Scalar& other, std::optional<std::string_view> rounding_mode) {
  KILN_INPLACE_AUTOGRAD(
      "div_", self, nullptr, [&] { div_(self, other, rounding_mode); },
      [&](const Tensor& s) { return div(s, other, rounding_mode); });
  check_defined(self, "div_", "input");
  const Rounding rounding = parse_rounding("div_", rounding_mode);
  const DType result = div_result(result_type({self, other}), rounding);
  const Tensor b = arith_scalar(other, result);
  ew::check_inplace("div_", self, b, result);
  divide("div_", self, b, result, rounding, &self);
  return self;
}

}  // namespace kiln
