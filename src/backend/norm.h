// The norm family of the kernel table: rms_norm (torch's and the HF variants) and
// layer_norm over contiguous rows (front end: src/ops/norm.cpp).
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// How an RMS-normalised row x * r (r = rsqrt(mean(x^2) + eps)) meets the weight.
enum class RmsNormKind : uint8_t {
  // y = (x r) w in the compute dtype, rounded once to out_dtype (torch rms_norm; with
  // w' = 1 + w also the zero-centred Qwen3-Next norm).
  ScaleThenWeight,
  // y = w * round(x r, in_dtype): LlamaRMSNorm.
  RoundThenWeight,
  // n = round(w * round(x r, in_dtype), weighted_dtype); y = n * silu(gate): the
  // Qwen3-Next gated norm.
  Gated,
};

// rows x cols, row-major and contiguous. weight (cols values) and gate (rows x cols)
// are given in the compute dtype, which is float64 when `compute` says so and float32
// otherwise; weight may be null for ScaleThenWeight.
struct RmsNormProblem {
  RmsNormKind kind;
  DType compute;  // Float32 or Float64
  DType in_dtype;
  const void* in;
  DType out_dtype;
  void* out;
  int64_t rows;
  int64_t cols;
  const void* weight;    // compute dtype, or null
  const void* gate;      // compute dtype, rows x cols (Gated only)
  DType weighted_dtype;  // Gated: the dtype w * n is rounded to
  double eps;
};

// y = (x - mean) * rsqrt(var + eps) * w + b per row, var biased; weight and bias in the
// compute dtype (either may be null).
struct LayerNormProblem {
  DType compute;  // Float32 or Float64
  DType in_dtype;
  const void* in;
  void* out;  // in_dtype
  int64_t rows;
  int64_t cols;
  const void* weight;
  const void* bias;
  double eps;
};

struct NormKernels {
  void (*rms_norm)(const ExecutionContext& ctx, const RmsNormProblem& p) = nullptr;
  void (*layer_norm)(const ExecutionContext& ctx, const LayerNormProblem& p) = nullptr;
};

inline KernelTable<NormKernels> norm_kernels{"norm"};

}  // namespace kiln::backend
