// Front ends of frexp, heaviside, logspace and special.laguerre_polynomial_l.
#include "kiln/ops/pointwise_extra.h"

#include "backend/pointwise_extra.h"
#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/type_promotion.h"
#include "ops/op_utils.h"

namespace kiln {

FrexpResult frexp(const Tensor& input) {
  check_defined(input, "frexp", "input");
  KILN_CHECK(is_floating(input.dtype()) && !is_fp8(input.dtype()), "frexp",
             "torch.frexp() only supports floating-point dtypes (got {})", dtype_name(input.dtype()));
  // f16/bf16 values are exact in float32, and so are their mantissas in their own dtype.
  const DType compute = input.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const Tensor in = input.to(compute).contiguous();
  Tensor mantissa = empty(input.sizes(), compute);
  Tensor exponent = empty(input.sizes(), DType::Int32);
  if (in.numel() > 0) {
    backend::pointwise_extra_kernels.on(input.device(), "frexp")
        .frexp(current_context(), {compute, in.numel(), in.data_ptr(), mantissa.data_ptr(), exponent.data<int32_t>()});
  }
  return {mantissa.to(input.dtype()), exponent};
}

Tensor heaviside(const Tensor& input, const Tensor& values) {
  check_defined(input, "heaviside", "input");
  check_defined(values, "heaviside", "values");
  KILN_CHECK(!is_complex(input.dtype()) && !is_complex(values.dtype()), "heaviside",
             "heaviside is not yet implemented for complex tensors.");
  KILN_CHECK(input.dtype() == values.dtype(), "heaviside",
             "heaviside is not yet implemented for tensors with different dtypes (got {} and {})",
             dtype_name(input.dtype()), dtype_name(values.dtype()));
  KILN_CHECK(!is_fp8(input.dtype()), "heaviside", "not implemented for '{}'", torch_type_name(input.dtype()));
  // PyTorch's kernel is `a == 0 ? b : (a > 0)`: NaN compares false both ways (0), and
  // -0.0 == 0. Three broadcasting passes; heaviside is not on a hot path.
  const Tensor step = gt(input, Scalar(int64_t{0})).to(input.dtype());
  return where(eq(input, Scalar(int64_t{0})), values, step);
}

Tensor logspace(const Scalar& start, const Scalar& end, int64_t steps, double base, std::optional<DType> dtype) {
  KILN_CHECK(!start.is_complex() && !end.is_complex(), "logspace", "complex start or end is not supported yet");
  KILN_CHECK(steps >= 0, "logspace", "number of steps must be non-negative, got {}", steps);
  const DType out = dtype.value_or(DType::Float32);
  KILN_CHECK(!is_fp8(out), "logspace", "not implemented for '{}'", torch_type_name(out));
  const Tensor exponents = linspace(start, end, steps, DType::Float64);
  const Tensor values = pow(Scalar(base), exponents);
  return values.to(out);
}

namespace special {

Tensor laguerre_polynomial_l(const Tensor& x, const Tensor& n) {
  const char* op = "laguerre_polynomial_l";
  check_defined(x, op, "input");
  check_defined(n, op, "n");
  DType t = result_type({x, n});
  if (is_integral(t, true)) t = DType::Float32;
  KILN_CHECK(t == DType::Float32 || t == DType::Float64, op, "\"{}\" not implemented for '{}'", op,
             torch_type_name(t));
  const Shape shape = broadcast_shapes(x.sizes(), n.sizes(), op);
  const Tensor xs = x.to(t).expand(shape).contiguous();
  const Tensor ns = n.to(t).expand(shape).contiguous();
  Tensor out = empty(shape, t);
  if (out.numel() > 0) {
    backend::pointwise_extra_kernels.on(x.device(), op)
        .laguerre_polynomial_l(current_context(), {t, out.numel(), xs.data_ptr(), ns.data_ptr(), out.data_ptr()});
  }
  return out;
}

// A Python number takes part in promotion as a 0-dim tensor of its category, cast
// unchecked to the result dtype (a wrapped number, as in PyTorch).
Tensor laguerre_polynomial_l(const Tensor& x, const Scalar& n) {
  return laguerre_polynomial_l(x, Tensor::from_scalar(n).to(result_type({x, n})));
}

Tensor laguerre_polynomial_l(const Scalar& x, const Tensor& n) {
  return laguerre_polynomial_l(Tensor::from_scalar(x).to(result_type({n, x})), n);
}

}  // namespace special

}  // namespace kiln
