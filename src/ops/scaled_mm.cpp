// scaled_mm and _scaled_mm: PyTorch's CPU validation (Blas.cpp's _scaled_mm_cpu_v2_out and
// _scaled_mm_out_cpu), then the scaled_mm kernel of the operands' device
// (backend/scaled_mm.h).
#include "kiln/ops/scaled_mm.h"

#include <string>

#include "backend/scaled_mm.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "ops/autograd_hooks_linalg.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

const char* scaling_name(ScalingType s) {
  switch (s) {
    case ScalingType::TensorWise: return "TensorWise";
    case ScalingType::RowWise: return "RowWise";
    case ScalingType::BlockWise1x16: return "BlockWise1x16";
    case ScalingType::BlockWise1x32: return "BlockWise1x32";
    case ScalingType::BlockWise1x128: return "BlockWise1x128";
    case ScalingType::BlockWise128x128: return "BlockWise128x128";
  }
  return "?";
}

bool is_tensorwise(const Tensor& mat, const Tensor& scale) {
  return is_fp8(mat.dtype()) && scale.dtype() == DType::Float32 && scale.numel() == 1;
}
// scale_a [M, 1], contiguous.
bool is_rowwise_a(const Tensor& a, const Tensor& scale) {
  return is_fp8(a.dtype()) && scale.dtype() == DType::Float32 && scale.dim() == 2 && scale.size(0) == a.size(0) &&
         scale.size(1) == 1 && scale.is_contiguous();
}
// scale_b [1, N] whose transpose is contiguous (PyTorch checks scale_b.t() against mat_b.t()).
bool is_rowwise_b(const Tensor& b, const Tensor& scale) {
  return is_fp8(b.dtype()) && scale.dtype() == DType::Float32 && scale.dim() == 2 && scale.size(0) == 1 &&
         scale.size(1) == b.size(1) && scale.t().is_contiguous();
}

[[noreturn]] void fail_scaling(ErrorKind kind, const char* op, const Tensor& a, const Tensor& b, const Tensor& scale_a,
                               const Tensor& scale_b) {
  fail(kind, op,
       "Invalid scaling configuration.\n"
       "- For TensorWise scaling, a and b should be float8, scales should be float and singletons.\n"
       "- For RowWise scaling, a and b should be float8, scales should be float, scale_a should be ({}, 1) and "
       "scale_b should be (1, {}), and both should be contiguous.\n"
       "Got a.dtype()={}, scale_a.dtype()={}, scale_a.size()={}, scale_a.stride()={}, b.dtype()={}, "
       "scale_b.dtype()={}, scale_b.size()={} and scale_b.stride()={}",
       a.size(0), b.size(1), dtype_name(a.dtype()), dtype_name(scale_a.dtype()), scale_a.shape_str(),
       shape_to_string(scale_a.strides()), dtype_name(b.dtype()), dtype_name(scale_b.dtype()), scale_b.shape_str(),
       shape_to_string(scale_b.strides()));
}

void check_matrices(ErrorKind kind, const char* op, const Tensor& a, const Tensor& b) {
  check_defined(a, op, "mat_a");
  check_defined(b, op, "mat_b");
  if (a.dim() != 2) fail(kind, op, "mat_a must be a matrix");
  if (b.dim() != 2) fail(kind, op, "mat_b must be a matrix");
  if (a.size(1) != b.size(0)) {
    fail(kind, op, "mat_a and mat_b shapes cannot be multiplied ({}x{} and {}x{})", a.size(0), a.size(1), b.size(0),
         b.size(1));
  }
}

void check_bias(ErrorKind size_kind, const char* op, const std::optional<Tensor>& bias, int64_t N) {
  if (!bias.has_value()) return;
  check_defined(*bias, op, "bias");
  if (bias->numel() != N) fail(size_kind, op, "Bias must be size {} but got {}", N, bias->numel());
  // numel N broadcast over the rows: [N] or [1, N] (or [1, ..., N]); [N, 1] would not broadcast.
  KILN_CHECK_KIND(bias->dim() >= 1 && bias->size(-1) == N, Value, op,
                  "bias must broadcast to the output's rows, i.e. have shape [{}], got {}", N, bias->shape_str());
  const DType d = bias->dtype();
  KILN_CHECK_KIND(d == DType::Float32 || d == DType::BFloat16 || d == DType::Float16, Value, op,
                  "Bias must be Float32 or BFloat16 or Half, but got {}", dtype_name(d));
}

void check_output_dtype(const char* op, DType d) {
  KILN_CHECK_KIND(d == DType::Float32 || d == DType::BFloat16 || d == DType::Float16 || is_fp8(d), Type, op,
                  "output dtype must be float32, bfloat16, float16, float8_e4m3fn or float8_e5m2, but got {}",
                  dtype_name(d));
}

struct ScaledMmPlan {
  bool rowwise = false;
  std::optional<Tensor> bias;
  float output_multiplier = 1.0f;  // 1 / scale_result for fp8 output
  DType out_dtype = DType::BFloat16;
};

Tensor run_scaled_mm(const char* op, const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                     const ScaledMmPlan& plan) {
  const int64_t M = a.size(0), N = b.size(1);
  Tensor out = Tensor::empty({M, N}, plan.out_dtype, kCPU, op);
  if (M == 0 || N == 0) return out;
  const auto kernel = backend::scaled_mm_kernels.on(a.device(), op).scaled_mm;
  const OpProfile profile(op, [&] {
    return OpCost{tensor_bytes({&a, &b, &out}), 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(a.size(1))};
  });
  kernel(current_context(), {a, b, scale_a, scale_b, plan.rowwise, plan.bias, plan.output_multiplier, out});
  // PyTorch records no derivative for the FP8 matmul: the output requires grad and its
  // backward raises.
  if (autograd_hooks::any_records(a, b, scale_a, scale_b, plan.bias)) [[unlikely]] {
    return autograd_hooks::installed(autograd_hooks::linalg_hooks().not_differentiable, "_scaled_mm")(
        "_scaled_mm", {a, b, scale_a, scale_b, plan.bias.value_or(Tensor())}, out);
  }
  return out;
}

}  // namespace

Tensor scaled_mm(const Tensor& mat_a, const Tensor& mat_b, const Tensor& scale_a, ScalingType recipe_a,
                 const Tensor& scale_b, ScalingType recipe_b, const std::optional<Tensor>& bias,
                 DType output_dtype) {
  constexpr const char* op = "scaled_mm";
  check_matrices(ErrorKind::Value, op, mat_a, mat_b);
  check_defined(scale_a, op, "scale_a");
  check_defined(scale_b, op, "scale_b");
  common_device(op, {&mat_a, &mat_b, &scale_a, &scale_b, bias ? &*bias : nullptr});
  const int64_t N = mat_b.size(1);
  check_bias(ErrorKind::Value, op, bias, N);
  for (const ScalingType r : {recipe_a, recipe_b}) {
    KILN_CHECK_KIND(r == ScalingType::TensorWise || r == ScalingType::RowWise, NotImplemented, op,
                    "the {} scaling recipe is not supported on CPU (TensorWise and RowWise are)", scaling_name(r));
  }
  ScaledMmPlan plan;
  if (recipe_a == ScalingType::TensorWise && recipe_b == ScalingType::TensorWise &&
      is_tensorwise(mat_a, scale_a) && is_tensorwise(mat_b, scale_b)) {
    plan.rowwise = false;
  } else if (recipe_a == ScalingType::RowWise && recipe_b == ScalingType::RowWise && is_rowwise_a(mat_a, scale_a) &&
             is_rowwise_b(mat_b, scale_b)) {
    plan.rowwise = true;
  } else {
    fail_scaling(ErrorKind::Value, op, mat_a, mat_b, scale_a, scale_b);
  }
  check_output_dtype(op, output_dtype);
  plan.bias = bias;
  plan.out_dtype = output_dtype;
  return run_scaled_mm(op, mat_a, mat_b, scale_a, scale_b, plan);
}

Tensor _scaled_mm(const Tensor& mat1, const Tensor& mat2, const Tensor& scale_a, const Tensor& scale_b,
                  const std::optional<Tensor>& bias, const std::optional<Tensor>& scale_result,
                  std::optional<DType> out_dtype) {
  constexpr const char* op = "_scaled_mm";
  check_defined(mat1, op, "mat1");
  check_defined(mat2, op, "mat2");
  check_defined(scale_a, op, "scale_a");
  check_defined(scale_b, op, "scale_b");
  // PyTorch infers the recipe before checking ranks (and cannot for non-matrices): kiln
  // checks the ranks first.
  if (mat1.dim() != 2) fail(ErrorKind::Runtime, op, "mat_a must be a matrix");
  if (mat2.dim() != 2) fail(ErrorKind::Runtime, op, "mat_b must be a matrix");
  ScaledMmPlan plan;
  if (is_tensorwise(mat1, scale_a) && is_tensorwise(mat2, scale_b)) {
    plan.rowwise = false;
  } else if (is_rowwise_a(mat1, scale_a) && is_rowwise_b(mat2, scale_b)) {
    plan.rowwise = true;
  } else {
    fail_scaling(ErrorKind::Runtime, op, mat1, mat2, scale_a, scale_b);
  }
  check_matrices(ErrorKind::Runtime, op, mat1, mat2);
  if (scale_result.has_value()) {
    check_defined(*scale_result, op, "scale_result");
    KILN_CHECK(scale_result->numel() == 1 && scale_result->dtype() == DType::Float32, op,
               "scale_result must be a float scalar");
  }
  check_bias(ErrorKind::Runtime, op, bias, mat2.size(1));
  plan.out_dtype = out_dtype.value_or(mat1.dtype());
  check_output_dtype(op, plan.out_dtype);
  if (scale_result.has_value() && is_fp8(plan.out_dtype)) {
    plan.output_multiplier = 1.0f / scale_result->contiguous().data<float>()[0];
  }
  plan.bias = bias;
  return run_scaled_mm(op, mat1, mat2, scale_a, scale_b, plan);
}

}  // namespace kiln
