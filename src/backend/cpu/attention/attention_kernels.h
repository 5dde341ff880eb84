// Attention kernels on the CPU (internal header: no Highway here).
//
// attention_prefill.cpp: the general tiled online-softmax kernel (any L, bias, causal,
// dropout); attention_decode.cpp: the fused L == 1 kernel split over the context.
// Both are compiled once per Highway target; the op front end (src/ops/attention.cpp)
// validates, broadcasts and fills an AttentionProblem.
#pragma once

#include <cstdint>

#include "backend/cpu/common/random.h"
#include "kiln/dtype.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

// One attention call over `rows` independent (batch, query head) pairs. Every pointer
// is element [0, ...] of its operand; a row's operands start at base + offset[row]
// (in elements). Within a row, q is [L, E], k [S, E], v [S, Ev] with the given row
// strides and a contiguous last dim; out is contiguous [rows, L, Ev].
struct AttentionProblem {
  DType dtype = DType::Float32;  // of q, k, v and out: f32, f64, bf16 or f16
  int64_t rows = 0, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1.0;
  bool causal = false;  // top-left aligned: query i sees keys 0..i

  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  const int64_t* q_offset = nullptr;
  const int64_t* k_offset = nullptr;
  const int64_t* v_offset = nullptr;
  int64_t q_stride_l = 0, k_stride_s = 0, v_stride_s = 0;

  // Additive bias (0 / -inf for a bool mask) in the compute dtype (double for f64,
  // float otherwise), or null. Element (i, j) of row r is at
  // bias + bias_offset[r] + i * bias_stride_l + j * bias_stride_s (strides may be 0).
  const void* bias = nullptr;
  const int64_t* bias_offset = nullptr;
  int64_t bias_stride_l = 0, bias_stride_s = 0;

  // Dropout on the attention weights, 0 <= p < 1. Element (r, i, j) is kept when the
  // Philox uniform number (r * L + i) * S + j of dropout_key is below 1 - p.
  double dropout_p = 0.0;
  PhiloxKey dropout_key{0, 0};
};

// The general kernel: any L and S >= 1, bias, causal and dropout. Work items are
// (row, block of queries); each walks the key blocks it can see with an online
// softmax, so memory is O(block^2) per thread, independent of L * S.
void attention_general_cpu(const AttentionProblem& p, ThreadPool& pool);

// The decode kernel: L == 1, S >= 1, no bias, not causal, no dropout. Consecutive
// rows reading the same K and V (GQA groups, broadcast heads) are processed together
// so the cache is read once per group; each group's context is split into slices
// reduced on separate threads and combined at the end.
void attention_decode_cpu(const AttentionProblem& p, ThreadPool& pool);

// The Highway targets (HWY_* bits) both kernels were compiled for; tests pin each.
int64_t attention_simd_targets();

}  // namespace kiln::cpu
