// The RMSNorm variants and layer_norm, unfused: statistics with mean(), the
// normalisation with rsqrt() and products, and each variant's rounding steps spelled
// out as to(dtype) round trips.
#include <limits>

#include "kiln/error.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "kiln/type_promotion.h"
#include "ops/composite/composite_util.h"

namespace kiln::composite {
namespace {

using detail::compute_dtype_of;
using detail::wider;

// The last `count` dims, as reductions name them.
DimList last_dims(int64_t count) {
  DimList dims;
  for (int64_t d = count; d >= 1; --d) dims.push_back(-d);
  return dims;
}

// PyTorch hands eps to a float32 computation as a float; the decision follows the
// input's dtype, so a float64 weight on float32 input still gets the float.
double eps_for(const Tensor& input, double eps) {
  return input.dtype() == DType::Float64 ? eps : static_cast<double>(static_cast<float>(eps));
}

// x * rsqrt(mean(x^2) + eps) over the last `dims` dims of the widened x.
Tensor rms_normalized(const Tensor& x, int64_t dims, double eps) {
  const Tensor mean_square = mean(mul(x, x), last_dims(dims), /*keepdim=*/true);
  return mul(x, rsqrt(add(mean_square, Scalar(eps))));
}

// t rounded to `dtype` and widened back: HF's `.to(input_dtype)` inside a norm.
Tensor rounded_through(const Tensor& t, DType dtype) { return t.to(dtype).to(t.dtype()); }

// The HF variants normalise the last dim with a [hidden] weight.
void check_last_dim_weight(const Tensor& input, const Tensor& weight, const char* op) {
  KILN_CHECK(input.dim() >= 1, op, "expected an input with at least one dim, got a 0-dim tensor");
  KILN_CHECK(weight.dim() == 1 && weight.size(0) == input.size(-1), op,
             "expected weight of shape [{}] (the input's last dim), got weight of shape {}", input.size(-1),
             weight.shape_str());
}

// normalized_shape must name the input's trailing dims (else mean() would reduce others).
void check_trailing_dims(const Tensor& input, const Shape& normalized_shape, const char* op) {
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  bool ok = nd >= 1 && input.dim() >= nd;
  for (int64_t i = 0; ok && i < nd; ++i) ok = input.size(input.dim() - nd + i) == normalized_shape[i];
  KILN_CHECK(ok, op, "normalized_shape {} must be the trailing dims of the input's shape {}",
             shape_to_string(normalized_shape), input.shape_str());
}

}  // namespace

Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  constexpr const char* op = "composite.rms_norm";
  DType compute = compute_dtype_of(input, op, "input");
  if (weight) compute = wider(compute, compute_dtype_of(*weight, op, "weight"));
  check_trailing_dims(input, normalized_shape, op);
  // eps = None: the epsilon of PyTorch's opmath dtype (float64 only for float64 input).
  const double e = eps ? eps_for(input, *eps)
                       : input.dtype() == DType::Float64 ? std::numeric_limits<double>::epsilon()
                                                         : static_cast<double>(std::numeric_limits<float>::epsilon());
  Tensor y = rms_normalized(input.to(compute), static_cast<int64_t>(normalized_shape.size()), e);
  if (weight) y = mul(y, weight->to(compute));
  return y.to(input.dtype());
}

Tensor rms_norm_llama(const Tensor& input, const Tensor& weight, double eps) {
  constexpr const char* op = "composite.rms_norm_llama";
  const DType compute = wider(compute_dtype_of(input, op, "input"), compute_dtype_of(weight, op, "weight"));
  check_last_dim_weight(input, weight, op);
  const Tensor n = rounded_through(rms_normalized(input.to(compute), 1, eps_for(input, eps)), input.dtype());
  return mul(weight.to(compute), n).to(promote_types(input.dtype(), weight.dtype()));
}

Tensor rms_norm_one_plus(const Tensor& input, const Tensor& weight, double eps) {
  constexpr const char* op = "composite.rms_norm_one_plus";
  const DType compute = wider(compute_dtype_of(input, op, "input"), compute_dtype_of(weight, op, "weight"));
  check_last_dim_weight(input, weight, op);
  const Tensor scale = add(weight.to(compute), Scalar(1.0));  // HF: 1.0 + weight.float()
  return mul(rms_normalized(input.to(compute), 1, eps_for(input, eps)), scale).to(input.dtype());
}

Tensor rms_norm_gated(const Tensor& input, const Tensor& gate, const Tensor& weight, double eps) {
  constexpr const char* op = "composite.rms_norm_gated";
  const DType compute = wider(wider(compute_dtype_of(input, op, "input"), compute_dtype_of(weight, op, "weight")),
                              compute_dtype_of(gate, op, "gate"));
  check_last_dim_weight(input, weight, op);
  KILN_CHECK(gate.sizes() == input.sizes(), op, "expected gate of the input's shape {}, got gate of shape {}",
             input.shape_str(), gate.shape_str());
  // Norm first (Llama's rounding), the weight in promote_types(input, weight), then the gate.
  const Tensor n = rounded_through(rms_normalized(input.to(compute), 1, eps_for(input, eps)), input.dtype());
  const Tensor weighted = rounded_through(mul(weight.to(compute), n), promote_types(input.dtype(), weight.dtype()));
  return mul(weighted, silu(gate.to(compute))).to(input.dtype());
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  constexpr const char* op = "composite.layer_norm";
  const DType compute = compute_dtype_of(input, op, "input");
  check_trailing_dims(input, normalized_shape, op);
  const DimList dims = last_dims(static_cast<int64_t>(normalized_shape.size()));
  const Tensor x = input.to(compute);
  // Two passes, as the kernel: the mean, then the biased variance of the deviations.
  const Tensor deviation = sub(x, mean(x, dims, /*keepdim=*/true));
  const Tensor variance = mean(mul(deviation, deviation), dims, /*keepdim=*/true);
  Tensor y = mul(deviation, rsqrt(add(variance, Scalar(eps_for(input, eps)))));
  if (weight) y = mul(y, weight->to(compute));
  if (bias) y = add(y, bias->to(compute));
  return y.to(input.dtype());
}

}  // namespace kiln::composite
