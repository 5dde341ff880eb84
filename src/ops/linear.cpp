// linear: PyTorch's F.linear front end (validation, shapes, dtype dispatch), and the
// helpers linear_fp8 shares (linear_common.h).
#include "kiln/ops/linear.h"

#include "backend/linear.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "ops/autograd_hooks.h"
#include "ops/linear_common.h"
#include "ops/op_utils.h"
#include "ops/out_checks.h"
#include "kiln/ops/out_variants.h"

namespace kiln {

namespace linear_detail {

LinearGeometry linear_geometry(const char* op, const Tensor& input, const Tensor& weight) {
  KILN_CHECK(input.dim() >= 1, op, "both arguments to linear need to be at least 1D, but they are {}D and {}D",
             input.dim(), weight.dim());
  KILN_CHECK(weight.dim() == 2, op,
             "weight must be a 2-D [out_features, in_features] matrix, got a {}-D tensor of shape {}", weight.dim(),
             weight.shape_str());
  LinearGeometry g;
  g.K = input.size(-1);
  g.N = weight.size(0);
  g.out_shape = Shape(input.sizes().begin(), input.sizes().end() - 1);
  g.M = shape_numel(g.out_shape, op);
  KILN_CHECK(weight.size(1) == g.K, op, "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})", g.M, g.K,
             weight.size(1), g.N);
  g.out_shape.push_back(g.N);
  g.x = input.contiguous();
  return g;
}

backend::LinearWeight weight_rows(const Tensor& weight, Tensor& keep) {
  keep = weight.size(1) <= 1 || weight.stride(1) == 1 ? weight : weight.contiguous();
  backend::LinearWeight w;
  w.data = keep.data_ptr();
  w.dtype = keep.dtype();
  w.N = keep.size(0);
  w.K = keep.size(1);
  // A stride along an extent-1 dim is arbitrary; any value reads the same single row.
  w.row_stride = w.N <= 1 ? w.K : keep.stride(0);
  return w;
}

std::optional<Tensor> checked_bias(const char* op, const std::optional<Tensor>& bias, DType dtype, int64_t N) {
  if (!bias.has_value()) return std::nullopt;
  check_defined(*bias, op, "bias");
  KILN_CHECK_KIND(bias->dtype() == dtype, Type, op, "bias must have the dtype of the input ({}), but got {}",
                  dtype_name(dtype), dtype_name(bias->dtype()));
  const bool broadcast = bias->dim() == 0 || (bias->dim() == 1 && bias->size(0) == 1);
  KILN_CHECK(broadcast || (bias->dim() == 1 && bias->size(0) == N), op,
             "bias must have shape [{}] (out_features), or [1] or [] to broadcast, but got {}", N, bias->shape_str());
  return bias->contiguous();
}

Tensor run_linear(const char* op, const LinearGeometry& g, const backend::LinearWeight& w,
                  const std::optional<Tensor>& bias) {
  Tensor out = Tensor::empty(g.out_shape, g.x.dtype(), g.x.device(), op);
  run_linear_into(op, g, w, bias, out);
  return out;
}

void run_linear_into(const char* op, const LinearGeometry& g, const backend::LinearWeight& w,
                     const std::optional<Tensor>& bias, const Tensor& out) {
  const DType dtype = g.x.dtype();
  if (g.M == 0 || g.N == 0) return;
  if (g.K == 0) {
    // An empty sum: PyTorch gives the bias (broadcast), or zeros.
    Tensor y = out;  // a handle on the caller's tensor
    if (bias.has_value()) {
      y.copy_(*bias);
    } else {
      y.zero_();
    }
    return;
  }
  backend::LinearActivations act;
  act.dtype = dtype;
  act.x = g.x.data_ptr();
  act.M = g.M;
  act.y = out.data_ptr();
  if (bias.has_value()) {
    act.bias = bias->data_ptr();
    act.bias_stride = bias->numel() == 1 ? 0 : 1;
  }
  const auto kernel = backend::linear_kernels.on(g.x.device(), op).linear;
  const OpProfile profile(op, [&] {
    const double weight_bytes = static_cast<double>(w.N) * static_cast<double>(w.K) * static_cast<double>(itemsize(w.dtype));
    return OpCost{weight_bytes + tensor_bytes({&g.x, &out}), 2.0 * static_cast<double>(g.M) * static_cast<double>(w.N) * static_cast<double>(w.K)};
  });
  kernel(current_context(), w, act);
}

}  // namespace linear_detail

namespace {

// linear's checks, with PyTorch's messages; the result is what run_linear takes.
struct CheckedLinear {
  linear_detail::LinearGeometry g;
  std::optional<Tensor> bias;
  Tensor weight_keep;
  backend::LinearWeight w;
};

CheckedLinear check_linear(const char* op, const Tensor& input, const Tensor& weight,
                           const std::optional<Tensor>& bias) {
  check_defined(input, op, "input");
  check_defined(weight, op, "weight");
  KILN_CHECK_KIND(weight.dtype() != DType::Float8_e4m3fn, Type, op,
                  "got a float8_e4m3fn weight: FP8 weights need their scales, use linear_fp8(input, weight, scale)");
  KILN_CHECK_KIND(input.dtype() == weight.dtype(), Type, op,
                  "mat1 and mat2 must have the same dtype, but got {} and {}", dtype_name(input.dtype()),
                  dtype_name(weight.dtype()));
  const DType dtype = input.dtype();
  common_device(op, {&input, &weight, bias ? &*bias : nullptr});
  KILN_CHECK_KIND(dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16 ||
                      dtype == DType::Float16,
                  Type, op, "expected float32, float64, bfloat16 or float16 tensors, got {}", dtype_name(dtype));
  CheckedLinear c;
  c.g = linear_detail::linear_geometry(op, input, weight);
  c.bias = linear_detail::checked_bias(op, bias, dtype, c.g.N);
  c.w = linear_detail::weight_rows(weight, c.weight_keep);
  return c;
}

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  KILN_AUTOGRAD(linear, input, weight, bias);
  constexpr const char* op = "linear";
  const CheckedLinear c = check_linear(op, input, weight, bias);
  return linear_detail::run_linear(op, c.g, c.w, c.bias);
}

void linear_out(const Tensor& out, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  constexpr const char* op = "linear_out";
  const CheckedLinear c = check_linear(op, input, weight, bias);
  out_detail::check_out(op, out, c.g.out_shape, input.dtype(), input.device(),
                        {&input, &weight, bias ? &*bias : nullptr});
  linear_detail::run_linear_into(op, c.g, c.w, c.bias, out);
}

}  // namespace kiln
