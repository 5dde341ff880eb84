// scaled_mm and _scaled_mm: PyTorch's CPU validation (Blas.cpp's _scaled_mm_cpu_v2_out and
// _scaled_mm_out_cpu), then fp8 -> float32 (SIMD), OpenBLAS sgemm, and one epilogue pass
// that applies the row/column scales, the bias and the output cast. Scaling C's rows and
// columns after the product equals scaling A's rows and B's columns before it (up to f32
// rounding), and costs M*N instead of M*K + K*N multiplies.
#include "kiln/ops/scaled_mm.h"

#include <string>

#include "backend/cpu/matmul/blas.h"
#include "backend/cpu/cast/cast.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/thread_pool.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

// Elements converted per task when widening: ~0.1 ms of conversion work.
constexpr int64_t kWidenGrain = int64_t{1} << 18;

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

// An fp8 matrix widened to float32 in its own orientation (a column-major operand stays
// column-major, so both are read in place by BLAS afterwards); other layouts are made
// contiguous first.
Tensor widen_to_f32(ThreadPool& pool, const Tensor& m) {
  if (!m.is_contiguous() && m.t().is_contiguous()) return widen_to_f32(pool, m.t()).t();
  const Tensor src = m.contiguous();
  Tensor dst = empty(src.sizes(), DType::Float32);
  const auto* in = static_cast<const uint8_t*>(src.data_ptr());
  float* out = dst.data<float>();
  const DType dtype = src.dtype();
  pool.parallel_for(src.numel(), kWidenGrain,
                    [&](int64_t begin, int64_t end) { cpu::to_f32(dtype, in + begin, out + begin, end - begin); });
  return dst;
}

struct ScaledMmPlan {
  bool rowwise = false;
  std::optional<Tensor> bias;
  float output_multiplier = 1.0f;  // 1 / scale_result for fp8 output
  DType out_dtype = DType::BFloat16;
};

Tensor run_scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                     const ScaledMmPlan& plan) {
  ThreadPool& pool = default_thread_pool();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  Tensor out = empty({M, N}, plan.out_dtype);
  if (M == 0 || N == 0) return out;
  // The float32 product goes straight into a float32 output, else into scratch.
  Tensor acc = plan.out_dtype == DType::Float32 ? out : empty({M, N}, DType::Float32);
  float* c = acc.data<float>();
  if (K == 0) {
    acc.zero_();
  } else {
    const Tensor af = widen_to_f32(pool, a);
    const Tensor bf = widen_to_f32(pool, b);
    const int64_t zero = 0;
    const cpu::GemmOperand ga{af.data_ptr(), &zero, af.stride(0), af.stride(1)};
    const cpu::GemmOperand gb{bf.data_ptr(), &zero, bf.stride(0), bf.stride(1)};
    cpu::gemm_batched(pool, DType::Float32, 1, M, N, K, ga, gb, c);
  }
  const Tensor sa = scale_a.contiguous(), sb = scale_b.contiguous();
  const float* sa_p = sa.data<float>();
  const float* sb_p = sb.data<float>();
  Tensor bias_f;
  if (plan.bias.has_value()) bias_f = plan.bias->reshape({N}).to(DType::Float32).contiguous();
  const float* bias_p = bias_f.defined() ? bias_f.data<float>() : nullptr;
  const bool rowwise = plan.rowwise;
  const float mult = plan.output_multiplier;
  const DType out_dtype = plan.out_dtype;
  char* out_p = static_cast<char*>(out.data_ptr());
  const int64_t out_row_bytes = N * static_cast<int64_t>(itemsize(out_dtype));
  const int64_t grain = std::max<int64_t>(1, kWidenGrain / N);
  pool.parallel_for(M, grain, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      float* row = c + m * N;
      const float row_scale = rowwise ? sa_p[m] : sa_p[0] * sb_p[0];
      for (int64_t n = 0; n < N; ++n) {
        float v = row[n] * row_scale;
        if (rowwise) v *= sb_p[n];
        if (bias_p != nullptr) v += bias_p[n];
        row[n] = v * mult;
      }
      if (out_dtype != DType::Float32) cpu::from_f32(row, out_dtype, out_p + m * out_row_bytes, N);
    }
  });
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
  return run_scaled_mm(mat_a, mat_b, scale_a, scale_b, plan);
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
  return run_scaled_mm(mat1, mat2, scale_a, scale_b, plan);
}

}  // namespace kiln
