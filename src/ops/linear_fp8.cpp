// linear_fp8, quantize_fp8_rowwise, dequantize_fp8: kiln's weight-only FP8 linear and
// its helpers (front ends; kernels behind backend/linear.h).
#include <string>

#include "backend/linear.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/linear.h"
#include "ops/autograd_hooks.h"
#include "ops/linear_common.h"
#include "ops/op_utils.h"
#include "ops/out_checks.h"
#include "kiln/ops/out_variants.h"

namespace kiln {

namespace {

// The weight's rows plus its checked, contiguous float32 scales in either layout.
backend::LinearWeight fp8_weight(const char* op, const Tensor& weight, const Tensor& scale, Tensor& weight_keep,
                             Tensor& scale_keep) {
  KILN_CHECK_KIND(weight.dtype() == DType::Float8_e4m3fn, Type, op, "weight must be float8_e4m3fn, but got {}",
                  dtype_name(weight.dtype()));
  KILN_CHECK(weight.dim() == 2, op, "weight must be a 2-D [out_features, in_features] matrix, got shape {}",
             weight.shape_str());
  KILN_CHECK_KIND(scale.dtype() == DType::Float32, Type, op,
                  "scale must be float32, but got {} (convert checkpoint scales with .to(float32))",
                  dtype_name(scale.dtype()));
  const int64_t N = weight.size(0), K = weight.size(1);
  const Shape per_row{N};
  const Shape per_block{ceil_div(N, kFp8ScaleBlock), ceil_div(K, kFp8ScaleBlock)};
  KILN_CHECK(scale.sizes() == per_row || scale.sizes() == per_block, op,
             "scale must be {} (one per output row) or {} (one per 128x128 block) for a weight of shape {}, but got "
             "{}",
             shape_to_string(per_row), shape_to_string(per_block), weight.shape_str(), scale.shape_str());
  backend::LinearWeight w = linear_detail::weight_rows(weight, weight_keep);
  scale_keep = scale.contiguous();
  w.scale = scale_keep.data<float>();
  w.scale_layout = scale.dim() == 1 ? backend::Fp8ScaleLayout::PerRow : backend::Fp8ScaleLayout::Block128;
  return w;
}

}  // namespace

namespace {

struct CheckedLinearFp8 {
  linear_detail::LinearGeometry g;
  std::optional<Tensor> bias;
  Tensor weight_keep, scale_keep;
  backend::LinearWeight w;
};

CheckedLinearFp8 check_linear_fp8(const char* op, const Tensor& input, const Tensor& weight, const Tensor& scale,
                                  const std::optional<Tensor>& bias) {
  check_defined(input, op, "input");
  check_defined(weight, op, "weight");
  check_defined(scale, op, "scale");
  common_device(op, {&input, &weight, &scale, bias ? &*bias : nullptr});
  const DType dtype = input.dtype();
  KILN_CHECK_KIND(dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float16, Type, op,
                  "input must be float32, bfloat16 or float16, but got {}", dtype_name(dtype));
  CheckedLinearFp8 c;
  c.w = fp8_weight(op, weight, scale, c.weight_keep, c.scale_keep);
  c.g = linear_detail::linear_geometry(op, input, weight);
  c.bias = linear_detail::checked_bias(op, bias, dtype, c.g.N);
  return c;
}

}  // namespace

Tensor linear_fp8(const Tensor& input, const Tensor& weight, const Tensor& scale, const std::optional<Tensor>& bias) {
  KILN_AUTOGRAD(linear_fp8, input, weight, scale, bias);
  constexpr const char* op = "linear_fp8";
  const CheckedLinearFp8 c = check_linear_fp8(op, input, weight, scale, bias);
  return linear_detail::run_linear(op, c.g, c.w, c.bias);
}

void linear_fp8_out(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& scale,
                    const std::optional<Tensor>& bias) {
  constexpr const char* op = "linear_fp8_out";
  const CheckedLinearFp8 c = check_linear_fp8(op, input, weight, scale, bias);
  out_detail::check_out(op, out, c.g.out_shape, input.dtype(), input.device(),
                        {&input, &weight, &scale, bias ? &*bias : nullptr});
  linear_detail::run_linear_into(op, c.g, c.w, c.bias, out);
}

namespace {

Fp8RowwiseQuantization quantize_rows(const Tensor& weight, bool with_error) {
  constexpr const char* op = "quantize_fp8_rowwise";
  check_defined(weight, op, "weight");
  const DType dtype = weight.dtype();
  KILN_CHECK_KIND(dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float16, Type, op,
                  "weight must be float32, bfloat16 or float16, but got {}", dtype_name(dtype));
  KILN_CHECK(weight.dim() == 2, op, "weight must be a 2-D [out_features, in_features] matrix, got shape {}",
             weight.shape_str());
  const int64_t N = weight.size(0), K = weight.size(1);
  Fp8RowwiseQuantization r{Tensor::empty({N, K}, DType::Float8_e4m3fn, kCPU, op),
                           Tensor::empty({N}, DType::Float32, kCPU, op), Tensor(), Tensor()};
  if (with_error) {
    r.squared_error = zeros({N}, DType::Float64);
    r.squared_norm = zeros({N}, DType::Float64);
  }
  if (K == 0) {
    r.scale.fill_(Scalar(1.0));
    return r;
  }
  Tensor w_keep;
  backend::Fp8RowQuantization p;
  p.w = linear_detail::weight_rows(weight, w_keep);
  p.q = r.weight.data<uint8_t>();
  p.scale = r.scale.data<float>();
  if (with_error) {
    p.row_sq_error = r.squared_error.data<double>();
    p.row_sq_norm = r.squared_norm.data<double>();
  }
  const auto kernel = backend::linear_kernels.on(weight.device(), op).quantize_fp8_rows;
  const int64_t bad = kernel(current_context(), p);
  KILN_CHECK_KIND(bad < 0, Value, op, "weight row {} holds inf or NaN, which float8_e4m3fn cannot scale", bad);
  return r;
}

}  // namespace

std::pair<Tensor, Tensor> quantize_fp8_rowwise(const Tensor& weight) {
  Fp8RowwiseQuantization r = quantize_rows(weight, false);
  return {r.weight, r.scale};
}

Fp8RowwiseQuantization quantize_fp8_rowwise_with_error(const Tensor& weight) { return quantize_rows(weight, true); }

Tensor dequantize_fp8(const Tensor& weight, const Tensor& scale, DType dtype) {
  constexpr const char* op = "dequantize_fp8";
  check_defined(weight, op, "weight");
  check_defined(scale, op, "scale");
  KILN_CHECK_KIND(dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float16, Type, op,
                  "dtype must be float32, bfloat16 or float16, but got {}", dtype_name(dtype));
  Tensor weight_keep, scale_keep;
  const backend::LinearWeight w = fp8_weight(op, weight, scale, weight_keep, scale_keep);
  Tensor out = Tensor::empty({w.N, w.K}, DType::Float32, kCPU, op);
  if (out.numel() > 0) {
    const auto kernel = backend::linear_kernels.on(weight.device(), op).dequantize_fp8_rows;
    kernel(current_context(), w, out.data<float>());
  }
  return out.to(dtype);
}

}  // namespace kiln
