// scaled_mm on the CPU: widen both fp8 operands, one sgemm, one epilogue pass.
#include "backend/cpu/matmul/scaled_mm.h"

#include <algorithm>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/matmul/blas.h"

namespace kiln::cpu {

namespace {

// Elements converted per task when widening: ~0.1 ms of conversion work.
constexpr int64_t kWidenGrain = int64_t{1} << 18;

// An fp8 matrix widened to float32 in its own orientation (a column-major operand stays
// column-major, so both are read in place by BLAS afterwards); other layouts are made
// contiguous first.
Tensor widen_to_f32(ThreadPool& pool, const Tensor& m) {
  if (!m.is_contiguous() && m.t().is_contiguous()) return widen_to_f32(pool, m.t()).t();
  const Tensor src = m.contiguous();
  Tensor dst = Tensor::empty(src.sizes(), DType::Float32);
  const auto* in = static_cast<const uint8_t*>(src.data_ptr());
  float* out = dst.data<float>();
  const DType dtype = src.dtype();
  pool.parallel_for(src.numel(), kWidenGrain,
                    [&](int64_t begin, int64_t end) { to_f32(dtype, in + begin, out + begin, end - begin); });
  return dst;
}

}  // namespace

void scaled_mm(ThreadPool& pool, const backend::ScaledMmProblem& p) {
  const int64_t M = p.a.size(0), K = p.a.size(1), N = p.b.size(1);
  const DType out_dtype = p.out.dtype();
  // The float32 product goes straight into a float32 output, else into scratch.
  Tensor acc = out_dtype == DType::Float32 ? p.out : Tensor::empty({M, N}, DType::Float32);
  float* c = acc.data<float>();
  if (K == 0) {
    acc.zero_();
  } else {
    const Tensor af = widen_to_f32(pool, p.a);
    const Tensor bf = widen_to_f32(pool, p.b);
    const int64_t zero = 0;
    const GemmOperand ga{af.data_ptr(), &zero, af.stride(0), af.stride(1)};
    const GemmOperand gb{bf.data_ptr(), &zero, bf.stride(0), bf.stride(1)};
    gemm_batched(pool, DType::Float32, 1, M, N, K, ga, gb, c);
  }
  const Tensor sa = p.scale_a.contiguous(), sb = p.scale_b.contiguous();
  const float* sa_p = sa.data<float>();
  const float* sb_p = sb.data<float>();
  Tensor bias_f;
  if (p.bias.has_value()) bias_f = p.bias->reshape({N}).to(DType::Float32).contiguous();
  const float* bias_p = bias_f.defined() ? bias_f.data<float>() : nullptr;
  const bool rowwise = p.rowwise;
  const float mult = p.output_multiplier;
  char* out_p = static_cast<char*>(p.out.data_ptr());
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
      if (out_dtype != DType::Float32) from_f32(row, out_dtype, out_p + m * out_row_bytes, N);
    }
  });
}

}  // namespace kiln::cpu
