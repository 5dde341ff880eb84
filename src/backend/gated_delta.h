// The gated_delta family of the kernel table: the pieces of a Gated DeltaNet layer
// (Qwen3-Next, Qwen3.5; spec/models.md §2.4) that are not plain projections or norms.
// Front end: src/ops/gated_delta.cpp. Every buffer is float32 and contiguous; the front
// end converts other dtypes once per call.
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"

namespace kiln::backend {

// Causal depthwise conv over tokens with a carried history (spec §2.4 b):
//   out[t, c] = act( sum_{j<K} weight[c, j] * u[t - (K-1) + j, c] )
// where u is the K-1 rows of `state` followed by the T rows of x. Afterwards `state`
// holds the last K-1 rows of that sequence (the history the next call continues from).
// x, out [tokens, channels]; weight [channels, kernel]; state [kernel - 1, channels].
struct CausalConv1dProblem {
  const float* x;
  const float* weight;
  float* state;
  float* out;
  int64_t tokens;
  int64_t channels;
  int64_t kernel;
  bool silu;
};

// Per token and value head: g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)
// (spec §2.4 d). a, b, g, beta [tokens, heads]; a_log, dt_bias [heads].
struct DeltaGatesProblem {
  const float* a;
  const float* b;
  const float* a_log;
  const float* dt_bias;
  float* g;
  float* beta;
  int64_t tokens;
  int64_t heads;
};

// The gated delta rule, token by token (spec §2.4 f, g): for each value head h (key head
// h / (value_heads / key_heads)) with state S [key_dim, value_dim]:
//   q, k <- q / sqrt(|q|^2 + 1e-6), k / sqrt(|k|^2 + 1e-6)   when l2norm_qk
//   q <- q * scale
//   S <- exp(g) S;  delta = beta (v - S^T k);  S <- S + k delta^T;  out = S^T q
// q, k [tokens, key_heads, key_dim]; v, out [tokens, value_heads, value_dim];
// g, beta [tokens, value_heads]; state [value_heads, key_dim, value_dim], updated.
struct GatedDeltaRuleProblem {
  const float* q;
  const float* k;
  const float* v;
  const float* g;
  const float* beta;
  float* state;
  float* out;
  int64_t tokens;
  int64_t key_heads;
  int64_t value_heads;
  int64_t key_dim;
  int64_t value_dim;
  bool l2norm_qk;
  float scale;
};

// One decode token of a Gated DeltaNet layer between its input projections and its
// output projection (spec §2.4 b-h for T = 1), for key head groups of value_heads /
// key_heads value heads:
//   mixed   = silu(causal conv of qkv over [conv_state; qkv])   conv_state updated
//   g, beta = the gates of a, b;   o = the gated delta rule (q and k L2-normalised, q
//   scaled by `scale`) on mixed's q, k, v                         state updated
//   out     = rms_norm(o per value head) * norm_weight * silu(z)
// computing what causal_conv1d, gates, rule (one token) and the norm family's gated
// RMSNorm (float32) compute, bit for bit.
// qkv [2 key_heads key_dim + value_heads value_dim]; conv_weight [that, kernel];
// conv_state [kernel - 1, that]; a, b, a_log, dt_bias [value_heads]; z, out [value_heads,
// value_dim]; norm_weight [value_dim]; state [value_heads, key_dim, value_dim].
struct DeltaNetDecodeProblem {
  const float* qkv;
  const float* conv_weight;
  float* conv_state;
  const float* a;
  const float* b;
  const float* a_log;
  const float* dt_bias;
  float* state;
  const float* z;
  const float* norm_weight;
  float* out;
  int64_t key_heads;
  int64_t value_heads;
  int64_t key_dim;
  int64_t value_dim;
  int64_t kernel;
  float scale;
  double norm_eps;  // as the norm kernel takes it (a float32 eps widened)
};

struct GatedDeltaKernels {
  void (*causal_conv1d)(const ExecutionContext& ctx, const CausalConv1dProblem& p) = nullptr;
  void (*gates)(const ExecutionContext& ctx, const DeltaGatesProblem& p) = nullptr;
  void (*rule)(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p) = nullptr;
  // The same rule in the chunked WY form (transformers' torch_chunk_gated_delta_rule):
  // tokens in chunks of `chunk_size` (1..64), the last one shorter, with one unit-lower
  // triangular solve per chunk and head (the linalg family's panel kernel, called per
  // chunk while its workspace is in L2). Equal to `rule` up to float32 rounding; for prompts.
  void (*rule_chunked)(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p, int64_t chunk_size) = nullptr;
  // The fused decode step (DeltaNetDecodeProblem) in one parallel region.
  void (*delta_net_decode)(const ExecutionContext& ctx, const DeltaNetDecodeProblem& p) = nullptr;
};

inline KernelTable<GatedDeltaKernels> gated_delta_kernels{"gated_delta"};

}  // namespace kiln::backend
