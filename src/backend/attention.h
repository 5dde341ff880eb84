// The attention family of the kernel table: scaled dot-product attention over rows of
// (batch, query head) pairs (front end: src/ops/attention.cpp).
#pragma once

#include <cstdint>

#include "backend/random.h"  // PhiloxKey
#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

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

struct AttentionKernels {
  void (*attention)(const ExecutionContext& ctx, const AttentionProblem& p) = nullptr;
};

inline KernelTable<AttentionKernels> attention_kernels{"attention"};

}  // namespace kiln::backend
