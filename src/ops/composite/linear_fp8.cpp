// composite::linear_fp8: dequantise the weight, then an ordinary float32 matmul.
#include "kiln/error.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "ops/composite/composite_util.h"

namespace kiln::composite {

Tensor linear_fp8(const Tensor& input, const Tensor& weight, const Tensor& scale, const std::optional<Tensor>& bias) {
  constexpr const char* op = "composite.linear_fp8";
  KILN_CHECK(input.defined() && weight.defined() && scale.defined(), op, "input, weight and scale must be defined");
  const DType dtype = input.dtype();
  KILN_CHECK_KIND(dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float16, Type, op,
                  "input must be float32, bfloat16 or float16, but got {}", dtype_name(dtype));
  KILN_CHECK_KIND(weight.dtype() == DType::Float8_e4m3fn, Type, op, "weight must be float8_e4m3fn, but got {}",
                  dtype_name(weight.dtype()));
  const Tensor w = detail::dequantized(weight, scale, op);  // [N, K] float32
  Tensor y = matmul(input.to(DType::Float32), w.t());
  if (bias) y = add(y, bias->to(DType::Float32));
  return y.to(dtype);
}

}  // namespace kiln::composite
