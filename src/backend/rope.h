// The rope family of the kernel table: the rotary tables (HF's default inv_freq and the
// cos/sin of each position) and the rotation itself (front end: src/ops/rope.cpp).
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// x and out: contiguous [tokens, heads, head_dim] of `dtype`. cos and sin: contiguous
// [table_rows, rotary_dim / 2] in the compute dtype (float64 for float64 x, float32
// otherwise); token t uses table row t % table_rows (table_rows = seq when every
// leading index shares the positions, = tokens for one row per token).
struct RopeProblem {
  DType dtype;
  const void* x;
  void* out;
  int64_t tokens;
  int64_t heads;
  int64_t head_dim;
  int64_t rotary_dim;
  const void* cos;
  const void* sin;
  int64_t table_rows;
  bool interleaved;
};

// cos/sin [count, half] (float32, contiguous) of the angles positions[t] * inv_freq[i],
// each angle one float32 product as HF's float32 matmul inv_freq @ position rounds it.
struct RopeCosSinProblem {
  const int64_t* positions;
  int64_t count;
  const float* inv_freq;  // [half]
  int64_t half;
  float* cos;
  float* sin;
};

struct RopeKernels {
  // HF's 1 / base^(2i / rotary_dim) for i < rotary_dim / 2, every step in float32 (base
  // rounded to float32 too), the power correctly rounded. rotary_dim even and >= 2.
  void (*inv_freq)(const ExecutionContext& ctx, int64_t rotary_dim, double rope_theta, float* out) = nullptr;
  void (*cos_sin)(const ExecutionContext& ctx, const RopeCosSinProblem& p) = nullptr;
  void (*rope)(const ExecutionContext& ctx, const RopeProblem& p) = nullptr;
};

inline KernelTable<RopeKernels> rope_kernels{"rope"};

}  // namespace kiln::backend
