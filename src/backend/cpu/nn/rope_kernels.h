// Rotary position embedding on the CPU (internal header: no Highway here).
#pragma once

#include <cstdint>

#include "backend/rope.h"
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

using backend::RopeCosSinProblem;
using backend::RopeProblem;

void rope_cpu(const RopeProblem& p, ThreadPool& pool);
// The float32 tables (rope_tables.cpp): plain loops, one value per angle.
void rope_inv_freq_cpu(int64_t rotary_dim, double rope_theta, float* out);
void rope_cos_sin_cpu(const RopeCosSinProblem& p);

}  // namespace kiln::cpu
