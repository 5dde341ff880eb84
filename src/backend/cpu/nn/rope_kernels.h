// Rotary position embedding on the CPU (internal header: no Highway here).
#pragma once

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

// Rotates the first rotary_dim entries of each of `heads` heads of one token (x and y
// [heads, head_dim], contiguous; y may equal x) by the token's angles: cos and sin
// hold rotary_dim / 2 values, one per pair. Pairs are (i, i + rotary_dim/2) unless
// `interleaved`, then (2i, 2i + 1). y_a = a cos - b sin, y_b = b cos + a sin. Entries
// past rotary_dim are copied.
void rope_rotate_token(const float* x, const float* cos, const float* sin, float* y, int64_t heads, int64_t head_dim,
                       int64_t rotary_dim, bool interleaved);
void rope_rotate_token(const double* x, const double* cos, const double* sin, double* y, int64_t heads,
                       int64_t head_dim, int64_t rotary_dim, bool interleaved);

// The Highway targets (HWY_* bits) the kernels were compiled for; tests pin each.
int64_t rope_simd_targets();

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
void rope_cpu(const RopeProblem& p, ThreadPool& pool);

}  // namespace kiln::cpu
