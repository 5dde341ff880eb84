// rms_norm (torch's and the three HF variants) and layer_norm front ends: shape and
// dtype rules, eps defaults, weights widened to the compute dtype, then the norm kernel
// of the input's device (backend/norm.h).
#include <limits>
#include <optional>
#include <string>

#include "backend/norm.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/nn.h"
#include "kiln/tensor.h"
#include "kiln/type_promotion.h"
#include "ops/autograd_hooks.h"
#include "ops/nn_utils.h"
#include "ops/op_utils.h"
#include "ops/out_checks.h"
#include "kiln/ops/out_variants.h"

namespace kiln {
namespace {

// PyTorch's dispatch error for a dtype the op has no kernel for.
void check_float_input(const Tensor& t, const char* op, const char* kernel) {
  if (!is_nn_float(t.dtype())) {
    fail(ErrorKind::Type, op,
         "\"{}\" not implemented for '{}' (got input of dtype {}; expected float32, float64, float16 or bfloat16)",
         kernel, torch_type_name(t.dtype()), dtype_name(t.dtype()));
  }
}

void check_float_param(const Tensor& t, const char* op, const char* name) {
  check_defined(t, op, name);
  KILN_CHECK_KIND(is_nn_float(t.dtype()), Type, op,
                  "expected {} of a float dtype (float32, float64, float16 or bfloat16), got {}", name,
                  dtype_name(t.dtype()));
}

// The checks PyTorch's layer_norm and rms_norm share, with its wording; returns the
// number of elements each normalised row has.
int64_t check_normalized_shape(const Tensor& input, const Shape& normalized_shape, const char* op) {
  KILN_CHECK(!normalized_shape.empty(), op,
             "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but "
             "got normalized_shape = {}",
             shape_to_string(normalized_shape));
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  bool matches = input.dim() >= nd;
  for (int64_t i = 0; matches && i < nd; ++i) matches = input.size(input.dim() - nd + i) == normalized_shape[i];
  if (!matches) {
    const std::string dims = shape_to_string(normalized_shape);  // "[3, 4]"
    fail(ErrorKind::Runtime, op,
         "Given normalized_shape={}, expected input with shape [*, {}], but got input of size{}", dims,
         dims.substr(1, dims.size() - 2), input.shape_str());
  }
  return shape_numel(normalized_shape, op);
}

void check_param_shape(const Tensor& param, const Shape& normalized_shape, const char* op, const char* name) {
  KILN_CHECK(param.sizes() == normalized_shape, op,
             "Expected {} to be of same shape as normalized_shape, but got {} of shape {} and normalized_shape = {}",
             name, name, param.shape_str(), shape_to_string(normalized_shape));
}

// PyTorch hands eps to a float32 computation as a float.
double eps_for(DType compute, double eps) {
  return compute == DType::Float64 ? eps : static_cast<double>(static_cast<float>(eps));
}

// `t` as a contiguous tensor of `compute` values.
Tensor widened(const Tensor& t, DType compute) { return t.to(compute).contiguous(); }

// The HF variants normalise the last dim with a [hidden] weight.
int64_t check_last_dim_weight(const Tensor& input, const Tensor& weight, const char* op) {
  KILN_CHECK(input.dim() >= 1, op, "expected an input with at least one dim, got a 0-dim tensor");
  const int64_t hidden = input.size(-1);
  KILN_CHECK(weight.dim() == 1 && weight.size(0) == hidden, op,
             "expected weight of shape [{}] (the input's last dim), got weight of shape {} for input of shape {}",
             hidden, weight.shape_str(), input.shape_str());
  return hidden;
}

// Into `into` when given (the _out ops: checked here against what would be allocated).
Tensor run_rms_norm(const char* op, backend::RmsNormKind kind, const Tensor& input, int64_t cols, DType compute,
                    DType out_dtype, const Tensor& weight, const Tensor& gate, DType weighted_dtype, double eps,
                    const Tensor* into = nullptr) {
  const Device device = common_device(op, {&input, &weight, &gate});
  if (into != nullptr) out_detail::check_out(op, *into, input.sizes(), out_dtype, device, {&input, &weight, &gate});
  const Tensor x = input.contiguous();
  Tensor out = into != nullptr ? *into : Tensor::empty(input.sizes(), out_dtype, device, op);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const auto kernel = backend::norm_kernels.on(x.device(), op).rms_norm;
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&x, &out, &weight, &gate}), 0}; });
  kernel(current_context(),
         {kind, compute, x.dtype(), x.data_ptr(), out_dtype, out.data_ptr(), rows, cols,
          weight.defined() ? weight.data_ptr() : nullptr, gate.defined() ? gate.data_ptr() : nullptr, weighted_dtype,
          eps});
  return out;
}

DType compute_for(DType a, DType b) {
  return a == DType::Float64 || b == DType::Float64 ? DType::Float64 : DType::Float32;
}

}  // namespace

Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  KILN_AUTOGRAD(rms_norm, input, normalized_shape, weight, eps);
  constexpr const char* op = "rms_norm";
  check_defined(input, op, "input");
  check_float_input(input, op, "rms_norm");
  const int64_t cols = check_normalized_shape(input, normalized_shape, op);
  if (weight) {
    check_float_param(*weight, op, "weight");
    check_param_shape(*weight, normalized_shape, op, "weight");
  }
  // PyTorch computes in float64 for float64 input (its opmath dtype); a float64 weight
  // also gets float64 arithmetic here, as its float32 * float64 multiply would.
  const DType compute = compute_for(input.dtype(), weight ? weight->dtype() : input.dtype());
  const bool double_opmath = input.dtype() == DType::Float64;
  const double e = eps ? eps_for(double_opmath ? DType::Float64 : DType::Float32, *eps)
                       : (double_opmath ? std::numeric_limits<double>::epsilon()
                                        : static_cast<double>(std::numeric_limits<float>::epsilon()));
  return run_rms_norm(op, backend::RmsNormKind::ScaleThenWeight, input, cols, compute, input.dtype(),
                      weight ? widened(*weight, compute) : Tensor(), Tensor(), input.dtype(), e);
}

namespace {

Tensor rms_norm_llama_impl(const char* op, const Tensor& input, const Tensor& weight, double eps,
                           const Tensor* into) {
  check_defined(input, op, "input");
  check_float_input(input, op, "rms_norm");
  check_float_param(weight, op, "weight");
  const int64_t cols = check_last_dim_weight(input, weight, op);
  const DType compute = compute_for(input.dtype(), weight.dtype());
  const DType out_dtype = promote_types(input.dtype(), weight.dtype());
  return run_rms_norm(op, backend::RmsNormKind::RoundThenWeight, input, cols, compute, out_dtype,
                      widened(weight, compute), Tensor(), out_dtype,
                      eps_for(compute_for(input.dtype(), input.dtype()), eps), into);
}

}  // namespace

Tensor rms_norm_llama(const Tensor& input, const Tensor& weight, double eps) {
  KILN_AUTOGRAD(rms_norm_llama, input, weight, eps);
  return rms_norm_llama_impl("rms_norm_llama", input, weight, eps, nullptr);
}

void rms_norm_llama_out(const Tensor& out, const Tensor& input, const Tensor& weight, double eps) {
  rms_norm_llama_impl("rms_norm_llama_out", input, weight, eps, &out);
}

void rms_norm_out(const Tensor& out, const Tensor& input, const Tensor& weight, double eps) {
  constexpr const char* op = "rms_norm_out";
  check_defined(input, op, "input");
  check_float_input(input, op, "rms_norm");
  check_float_param(weight, op, "weight");
  KILN_CHECK(weight.dim() == 1, op, "expected a 1-D weight (normalized_shape [{}]), got weight of shape {}",
             input.dim() >= 1 ? input.size(-1) : 0, weight.shape_str());
  const Shape normalized{weight.size(0)};
  const int64_t cols = check_normalized_shape(input, normalized, op);
  // As rms_norm computes with normalized_shape = weight's shape and this eps.
  const DType compute = compute_for(input.dtype(), weight.dtype());
  const bool double_opmath = input.dtype() == DType::Float64;
  run_rms_norm(op, backend::RmsNormKind::ScaleThenWeight, input, cols, compute, input.dtype(),
               widened(weight, compute), Tensor(), input.dtype(),
               eps_for(double_opmath ? DType::Float64 : DType::Float32, eps), &out);
}

Tensor rms_norm_one_plus(const Tensor& input, const Tensor& weight, double eps) {
  KILN_AUTOGRAD(rms_norm_one_plus, input, weight, eps);
  constexpr const char* op = "rms_norm_one_plus";
  check_defined(input, op, "input");
  check_float_input(input, op, "rms_norm");
  check_float_param(weight, op, "weight");
  const int64_t cols = check_last_dim_weight(input, weight, op);
  const DType compute = compute_for(input.dtype(), weight.dtype());
  // HF: `1.0 + self.weight.float()`, a float32 sum (float64 here when computing in it).
  const Tensor scale = add(widened(weight, compute), Scalar(1.0));
  return run_rms_norm(op, backend::RmsNormKind::ScaleThenWeight, input, cols, compute, input.dtype(), scale, Tensor(),
                      input.dtype(), eps_for(compute_for(input.dtype(), input.dtype()), eps));
}

namespace {

Tensor rms_norm_gated_impl(const char* op, const Tensor& input, const Tensor& gate, const Tensor& weight, double eps,
                           const Tensor* into) {
  check_defined(input, op, "input");
  check_float_input(input, op, "rms_norm");
  check_float_param(weight, op, "weight");
  check_float_param(gate, op, "gate");
  const int64_t cols = check_last_dim_weight(input, weight, op);
  KILN_CHECK(gate.sizes() == input.sizes(), op, "expected gate of the input's shape {}, got gate of shape {}",
             input.shape_str(), gate.shape_str());
  const DType compute = compute_for(compute_for(input.dtype(), weight.dtype()), gate.dtype());
  return run_rms_norm(op, backend::RmsNormKind::Gated, input, cols, compute, input.dtype(), widened(weight, compute),
                      widened(gate, compute), promote_types(input.dtype(), weight.dtype()),
                      eps_for(compute_for(input.dtype(), input.dtype()), eps), into);
}

}  // namespace

Tensor rms_norm_gated(const Tensor& input, const Tensor& gate, const Tensor& weight, double eps) {
  KILN_AUTOGRAD(rms_norm_gated, input, gate, weight, eps);
  return rms_norm_gated_impl("rms_norm_gated", input, gate, weight, eps, nullptr);
}

void rms_norm_gated_out(const Tensor& out, const Tensor& input, const Tensor& gate, const Tensor& weight, double eps) {
  rms_norm_gated_impl("rms_norm_gated_out", input, gate, weight, eps, &out);
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  KILN_AUTOGRAD(layer_norm, input, normalized_shape, weight, bias, eps);
  constexpr const char* op = "layer_norm";
  check_defined(input, op, "input");
  check_float_input(input, op, "LayerNormKernelImpl");
  const int64_t cols = check_normalized_shape(input, normalized_shape, op);
  const DType compute = input.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  // PyTorch's CPU rule: parameters have the input's dtype, or float32 for a float16 /
  // bfloat16 input ("mixed dtype").
  auto param = [&](const std::optional<Tensor>& t, const char* name) -> Tensor {
    if (!t) return Tensor();
    check_defined(*t, op, name);
    const DType dt = t->dtype();
    KILN_CHECK_KIND(dt == input.dtype() || (is_reduced_float(input.dtype()) && dt == DType::Float32), Type, op,
                    "expected {} of dtype {} (the input's){}, got {}", name, dtype_name(input.dtype()),
                    is_reduced_float(input.dtype()) ? " or float32" : "", dtype_name(dt));
    check_param_shape(*t, normalized_shape, op, name);
    return widened(*t, compute);
  };
  const Tensor w = param(weight, "weight");
  const Tensor b = param(bias, "bias");
  const Tensor x = input.contiguous();
  Tensor out = Tensor::empty(input.sizes(), input.dtype());
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const auto kernel = backend::norm_kernels.on(x.device(), op).layer_norm;
  kernel(current_context(), {compute, x.dtype(), x.data_ptr(), out.data_ptr(), rows, cols,
                             w.defined() ? w.data_ptr() : nullptr, b.defined() ? b.data_ptr() : nullptr,
                             eps_for(compute, eps)});
  return out;
}

}  // namespace kiln
