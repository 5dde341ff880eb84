// Gated DeltaNet kernels on the CPU (internal header).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/gated_delta.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

using backend::CausalConv1dProblem;
using backend::DeltaGatesProblem;
using backend::GatedDeltaRuleProblem;

using backend::DeltaNetDecodeProblem;

void causal_conv1d_cpu(const ExecutionContext& ctx, const CausalConv1dProblem& p);
void delta_gates_cpu(const DeltaGatesProblem& p, ThreadPool& pool);
void gated_delta_rule_cpu(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p);
void gated_delta_rule_chunked_cpu(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p, int64_t chunk_size);
void delta_net_decode_cpu(const ExecutionContext& ctx, const DeltaNetDecodeProblem& p);

// The pieces the unfused kernels above and the fused decode step (delta_net_decode.cpp)
// share, so that both compute bit for bit the same values.

// Channels per conv block: the block's taps live in a small table.
inline constexpr int64_t kConvBlock = 64;
// The conv of channels [c0, c1) of p (any range, run in blocks of kConvBlock; each
// channel's arithmetic does not depend on the block it falls in), its history updated;
// token t's output of channel c0 + i goes to out[t * out_stride + i]. taps: kernel x
// kConvBlock floats of scratch.
void causal_conv1d_channels(const CausalConv1dProblem& p, int64_t c0, int64_t c1, float* taps, float* out,
                            int64_t out_stride);
// g = -exp(a_log) softplus(a + dt_bias), beta = sigmoid(b) for one head and token.
void delta_gate(float a, float b, float a_log, float dt_bias, float* g, float* beta);
// qn = q * q_scale and kn = k * k_scale (qk_scales below); returns kn . qn.
float normalized_qk(const float* q, const float* k, int64_t dk, float scale, bool l2norm, float* qn, float* kn);

// The factors q and k of one head are multiplied by: `scale` and 1, divided by their
// L2 norms (transformers' and FLA's l2norm: x * rsqrt(sum x^2 + 1e-6)) when `l2norm`.
// Shared by the recurrent and the chunked kernel, which must agree bit for bit.
inline void qk_scales(const float* q, const float* k, int64_t dk, float scale, bool l2norm, float* q_scale,
                      float* k_scale) {
  constexpr float kL2NormEps = 1e-6f;
  *q_scale = scale;
  *k_scale = 1.0f;
  if (!l2norm) return;
  // Eight partial sums (vector lanes), added in a fixed tree: one running sum would be
  // a chain of dk dependent adds per row.
  constexpr int kParts = 8;
  float qq[kParts] = {}, kk[kParts] = {};
  int64_t r = 0;
  for (; r + kParts <= dk; r += kParts) {
    for (int l = 0; l < kParts; ++l) {
      qq[l] += q[r + l] * q[r + l];
      kk[l] += k[r + l] * k[r + l];
    }
  }
  for (; r < dk; ++r) {
    qq[0] += q[r] * q[r];
    kk[0] += k[r] * k[r];
  }
  const auto total = [](const float* s) { return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])); };
  *q_scale /= std::sqrt(total(qq) + kL2NormEps);
  *k_scale /= std::sqrt(total(kk) + kL2NormEps);
}

}  // namespace kiln::cpu
