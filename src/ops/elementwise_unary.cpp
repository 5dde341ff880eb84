// Unary elementwise ops: abs/neg/sign, the float-valued functions (exp, log, sqrt,
// sigmoid, ...), the activations (silu, gelu, softplus, relu) and the roundings.
#include <string_view>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "ops/autograd_hooks.h"
#include "core/memory_format.h"
#include "ops/elementwise_common.h"
#include "ops/op_utils.h"
#include "ops/out_checks.h"
#include "kiln/grad_mode.h"
#include "kiln/ops/out_variants.h"

namespace kiln {

namespace ew = elementwise;
using backend::UnaryOp;

namespace {

// out = op(x) in dtype `result`, computed in compute_dtype(result) (integer inputs are
// converted to it by the engine). x is defined (the callers check).
Tensor apply_unary(const char* name, UnaryOp op, const Tensor& x, DType result, const backend::KernelArgs& args = {}) {
  const DType compute = compute_dtype(result);
  ew::require_kernel(name, x.device(), op, compute, x.dtype());
  Tensor out = empty_elementwise_output(x.sizes(), result, x.device(), {&x}, name);
  ew::run_unary(name, out, compute, x, compute, op, args);
  return out;
}

// A float-valued function: integer and bool inputs give float32.
Tensor float_unary(const char* name, UnaryOp op, const Tensor& x) {
  check_defined(x, name, "input");
  return apply_unary(name, op, x, float_result_dtype(x.dtype()));
}

// An op that keeps the dtype and has no meaning for bool (PyTorch has no bool kernel).
Tensor same_dtype_no_bool(const char* name, UnaryOp op, const Tensor& x) {
  check_defined(x, name, "input");
  KILN_CHECK_KIND(x.dtype() != DType::Bool, Type, name, "not supported for bool tensors");
  return apply_unary(name, op, x, x.dtype());
}

// An activation of torch.nn.functional: floating-point input only.
Tensor activation(const char* name, UnaryOp op, const Tensor& x, const backend::KernelArgs& args = {}) {
  check_defined(x, name, "input");
  ew::check_floating(name, x.dtype());
  return apply_unary(name, op, x, x.dtype(), args);
}

// A floating op into `out` of x's dtype and shape. out may be x itself (each element is
// read before it is written); any other overlap is refused.
void floating_unary_into(const char* name, UnaryOp op, const Tensor& out, const Tensor& x) {
  check_defined(x, name, "input");
  ew::check_floating(name, x.dtype());
  const bool same = out.defined() && out.data_ptr() == x.data_ptr() && x.is_contiguous() && out.sizes() == x.sizes();
  out_detail::check_out(name, out, x.sizes(), x.dtype(), x.device(), {same ? nullptr : &x});
  if (same && GradMode::is_enabled()) {
    KILN_CHECK(!x.requires_grad(), name,
               "functions with out=... arguments don't support automatic differentiation, but one of the arguments "
               "requires grad.");
  }
  const DType compute = compute_dtype(x.dtype());
  ew::require_kernel(name, x.device(), op, compute, x.dtype());
  ew::run_unary(name, out, compute, x, compute, op);
}

}  // namespace

void sigmoid_out(const Tensor& out, const Tensor& x) { floating_unary_into("sigmoid_out", UnaryOp::Sigmoid, out, x); }
void silu_out(const Tensor& out, const Tensor& x) { floating_unary_into("silu_out", UnaryOp::Silu, out, x); }

Tensor abs(const Tensor& x) {
  KILN_AUTOGRAD(abs, x);
  check_defined(x, "abs", "input");
  KILN_CHECK_KIND(x.dtype() != DType::Bool, Type, "abs", "not supported for bool tensors");
  if (!is_complex(x.dtype())) return apply_unary("abs", UnaryOp::Abs, x, x.dtype());
  // |z| is real: the kernel reads complex and writes the real dtype.
  const DType real = to_real(x.dtype());
  ew::require_kernel("abs", x.device(), UnaryOp::Abs, x.dtype(), x.dtype());
  Tensor out = empty_elementwise_output(x.sizes(), real, x.device(), {&x}, "abs");
  ew::run_unary("abs", out, real, x, x.dtype(), UnaryOp::Abs);
  return out;
}

Tensor neg(const Tensor& x) {
  KILN_AUTOGRAD(neg, x);
  check_defined(x, "neg", "input");
  KILN_CHECK(x.dtype() != DType::Bool, "neg",
             "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
             "use the `~` or `logical_not()` operator instead.");
  return apply_unary("neg", UnaryOp::Neg, x, x.dtype());
}

Tensor sign(const Tensor& x) {
  KILN_AUTOGRAD(sign, x);
  check_defined(x, "sign", "input");
  KILN_CHECK(!is_complex(x.dtype()), "sign",
             "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead.");
  return apply_unary("sign", UnaryOp::Sign, x, x.dtype());
}

Tensor square(const Tensor& x) {
  KILN_AUTOGRAD(square, x);
  check_defined(x, "square", "input");
  return pow(x, Scalar(int64_t{2}));
}

Tensor exp(const Tensor& x) {
  KILN_AUTOGRAD(exp, x);
  return float_unary("exp", UnaryOp::Exp, x);
}
Tensor exp2(const Tensor& x) {
  KILN_AUTOGRAD(exp2, x);
  return float_unary("exp2", UnaryOp::Exp2, x);
}
Tensor expm1(const Tensor& x) {
  KILN_AUTOGRAD(expm1, x);
  return float_unary("expm1", UnaryOp::Expm1, x);
}
Tensor log(const Tensor& x) {
  KILN_AUTOGRAD(log, x);
  return float_unary("log", UnaryOp::Log, x);
}
Tensor log2(const Tensor& x) {
  KILN_AUTOGRAD(log2, x);
  return float_unary("log2", UnaryOp::Log2, x);
}
Tensor log1p(const Tensor& x) {
  KILN_AUTOGRAD(log1p, x);
  return float_unary("log1p", UnaryOp::Log1p, x);
}
Tensor sqrt(const Tensor& x) {
  KILN_AUTOGRAD(sqrt, x);
  return float_unary("sqrt", UnaryOp::Sqrt, x);
}
Tensor rsqrt(const Tensor& x) {
  KILN_AUTOGRAD(rsqrt, x);
  return float_unary("rsqrt", UnaryOp::Rsqrt, x);
}
Tensor reciprocal(const Tensor& x) {
  KILN_AUTOGRAD(reciprocal, x);
  return float_unary("reciprocal", UnaryOp::Reciprocal, x);
}
Tensor sin(const Tensor& x) {
  KILN_AUTOGRAD(sin, x);
  return float_unary("sin", UnaryOp::Sin, x);
}
Tensor cos(const Tensor& x) {
  KILN_AUTOGRAD(cos, x);
  return float_unary("cos", UnaryOp::Cos, x);
}
Tensor tanh(const Tensor& x) {
  KILN_AUTOGRAD(tanh, x);
  return float_unary("tanh", UnaryOp::Tanh, x);
}
Tensor sigmoid(const Tensor& x) {
  KILN_AUTOGRAD(sigmoid, x);
  return float_unary("sigmoid", UnaryOp::Sigmoid, x);
}

Tensor silu(const Tensor& x) {
  KILN_AUTOGRAD(silu, x);
  return activation("silu", UnaryOp::Silu, x);
}

Tensor gelu(const Tensor& x, std::string_view approximate) {
  KILN_AUTOGRAD(gelu, x, approximate);
  if (approximate == "none") return activation("gelu", UnaryOp::Gelu, x);
  if (approximate == "tanh") return activation("gelu", UnaryOp::GeluTanh, x);
  fail(ErrorKind::Value, "gelu", "approximate argument must be either none or tanh (got '{}')", approximate);
}

Tensor softplus(const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  KILN_AUTOGRAD(softplus, x, beta, threshold);
  KILN_CHECK_KIND(!beta.is_complex() && !threshold.is_complex(), Type, "softplus",
                  "beta and threshold must be real numbers (got {} and {})", beta.str(), threshold.str());
  backend::KernelArgs args;
  args.beta = ew::kernel_scalar(beta);
  args.threshold = ew::kernel_scalar(threshold);
  return activation("softplus", UnaryOp::Softplus, x, args);
}

Tensor relu(const Tensor& x) {
  KILN_AUTOGRAD(relu, x);
  return same_dtype_no_bool("relu", UnaryOp::Relu, x);
}
Tensor floor(const Tensor& x) {
  KILN_AUTOGRAD(floor, x);
  return same_dtype_no_bool("floor", UnaryOp::Floor, x);
}
Tensor ceil(const Tensor& x) {
  KILN_AUTOGRAD(ceil, x);
  return same_dtype_no_bool("ceil", UnaryOp::Ceil, x);
}
Tensor round(const Tensor& x) {
  KILN_AUTOGRAD(round, x);
  return same_dtype_no_bool("round", UnaryOp::Round, x);
}
Tensor trunc(const Tensor& x) {
  KILN_AUTOGRAD(trunc, x);
  return same_dtype_no_bool("trunc", UnaryOp::Trunc, x);
}

}  // namespace kiln
