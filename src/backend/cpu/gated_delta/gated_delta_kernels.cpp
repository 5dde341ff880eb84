// Gated DeltaNet kernels: the conv and the gates are plain loops whose innermost loop
// runs over contiguous channels, which the compiler vectorises; the recurrent rule's
// per-head step, which streams the state, is Highway code (delta_rule_step.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/elementwise/activation_fused_kernels.h"
#include "backend/cpu/gated_delta/delta_rule_step.h"
#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "kiln/context.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

// torch.nn.functional.softplus with beta 1, threshold 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Channels [c0, c1) with c1 - c0 <= kConvBlock, the block's taps copied into `taps`
// (kernel x kConvBlock floats); token t's outputs go to out + t * out_stride.
void conv_block(const CausalConv1dProblem& p, int64_t c0, int64_t c1, float* taps, float* out_base,
                int64_t out_stride) {
  const int64_t K = p.kernel, C = p.channels, n = c1 - c0, hist = K - 1;
  for (int64_t j = 0; j < K; ++j)
    for (int64_t c = 0; c < n; ++c) taps[j * kConvBlock + c] = p.weight[(c0 + c) * K + j];
  float acc[kConvBlock];
  for (int64_t t = 0; t < p.tokens; ++t) {
    std::fill(acc, acc + n, 0.0f);
    for (int64_t j = 0; j < K; ++j) {
      const int64_t src = t - hist + j;  // row of the sequence [state; x]
      const float* row = (src >= 0 ? p.x + src * C : p.state + (hist + src) * C) + c0;
      const float* w = taps + j * kConvBlock;
      for (int64_t c = 0; c < n; ++c) acc[c] += w[c] * row[c];
    }
    float* out = out_base + t * out_stride;
    if (p.silu) {
      silu(acc, out, n);  // the vector exp: a scalar std::exp per element dominated prefill
    } else {
      std::copy(acc, acc + n, out);
    }
  }
  // The new history is rows T .. T+K-2 of [state; x] (row i < K-1 is state row i, row
  // i >= K-1 is x row i - (K-1)). New row r reads old state row r + T (> r) when it comes
  // from the state, so ascending order never reads a row already replaced.
  for (int64_t r = 0; r < hist; ++r) {
    const int64_t i = p.tokens + r;
    const float* from = (i >= hist ? p.x + (i - hist) * C : p.state + i * C) + c0;
    std::copy(from, from + n, p.state + r * C + c0);
  }
}

}  // namespace

void causal_conv1d_channels(const CausalConv1dProblem& p, int64_t c0, int64_t c1, float* taps, float* out,
                            int64_t out_stride) {
  for (int64_t b = c0; b < c1; b += kConvBlock) {
    conv_block(p, b, std::min(c1, b + kConvBlock), taps, out + (b - c0), out_stride);
  }
}

// A prompt runs token-major: a thread takes a run of tokens and computes whole output
// rows from whole input rows, so x and out stream contiguously (channel blocks over all
// tokens read 256-byte pieces 4 C bytes apart, a page per piece: 10-20 ms for Qwen3.5's
// 512 x 8192 prompt against ~1 ms this way). Each channel's arithmetic is conv_block's,
// in the same order (0, then + w_j * x_j for j = 0 .. K-1, then silu), so a prompt and
// the fused decode step agree bit for bit. The history is updated after every token has
// read it. One token (a decode step through the op) keeps the channel blocks.
void causal_conv1d_cpu(const ExecutionContext& ctx, const CausalConv1dProblem& p) {
  const int64_t K = p.kernel, C = p.channels, hist = K - 1;
  if (p.tokens <= 1) {
    const int64_t blocks = (C + kConvBlock - 1) / kConvBlock;
    ctx.pool().parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
      float* taps = ctx.scratch_of<float>(0, checked_mul(K, kConvBlock, "causal_conv1d"));
      for (int64_t b = begin; b < end; ++b) {
        const int64_t c0 = b * kConvBlock;
        conv_block(p, c0, std::min(C, c0 + kConvBlock), taps, p.out + c0, C);
      }
    });
    return;
  }
  // The taps as [K, C] rows, read by every thread.
  std::vector<float> taps(static_cast<size_t>(checked_mul(K, C, "causal_conv1d")));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) taps[static_cast<size_t>(j * C + c)] = p.weight[c * K + j];
  // Rows of [state; x]: row i < K-1 is state row i, row i >= K-1 is x row i - (K-1).
  const auto row = [&](int64_t i) { return i >= hist ? p.x + (i - hist) * C : p.state + i * C; };
  // At least ~64 KiB of output per chunk, so small prompts stay on one thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(C, 1));
  ctx.pool().parallel_for(p.tokens, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* out = p.out + t * C;
      // [state; x] row t + j is sequence position t - (K-1) + j.
      if (K == 4) {  // every model's kernel: one pass over the row
        const float *x0 = row(t), *x1 = row(t + 1), *x2 = row(t + 2), *x3 = row(t + 3);
        const float *w0 = taps.data(), *w1 = w0 + C, *w2 = w1 + C, *w3 = w2 + C;
        for (int64_t c = 0; c < C; ++c) out[c] = (((0.0f + w0[c] * x0[c]) + w1[c] * x1[c]) + w2[c] * x2[c]) + w3[c] * x3[c];
      } else {
        std::fill(out, out + C, 0.0f);
        for (int64_t j = 0; j < K; ++j) {
          const float* x = row(t + j);
          const float* w = taps.data() + j * C;
          for (int64_t c = 0; c < C; ++c) out[c] += w[c] * x[c];
        }
      }
      if (p.silu) silu(out, out, C);
    }
  });
  // The new history is rows T .. T+K-2 of [state; x]; ascending order never reads a
  // state row already replaced (new row r reads old row r + T > r).
  for (int64_t r = 0; r < hist; ++r) {
    const float* from = row(p.tokens + r);
    std::copy(from, from + C, p.state + r * C);
  }
}

void delta_gate(float a, float b, float a_log, float dt_bias, float* g, float* beta) {
  *g = -std::exp(a_log) * softplus(a + dt_bias);
  *beta = 1.0f / (1.0f + std::exp(-b));
}

void delta_gates_cpu(const DeltaGatesProblem& p, ThreadPool& pool) {
  pool.parallel_for(p.tokens, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t h = 0; h < p.heads; ++h) {
        const int64_t i = t * p.heads + h;
        delta_gate(p.a[i], p.b[i], p.a_log[h], p.dt_bias[h], &p.g[i], &p.beta[i]);
      }
    }
  });
}

float normalized_qk(const float* q, const float* k, int64_t dk, float scale, bool l2norm, float* qn, float* kn) {
  float q_scale = 0.0f, k_scale = 0.0f;
  qk_scales(q, k, dk, scale, l2norm, &q_scale, &k_scale);
  float kq = 0.0f;
  for (int64_t r = 0; r < dk; ++r) {
    qn[r] = q[r] * q_scale;
    kn[r] = k[r] * k_scale;
    kq += kn[r] * qn[r];
  }
  return kq;
}

// One value head over every token; each token reads the head's state once and writes it
// once (delta_rule_step). A thread takes a contiguous run of heads.
void gated_delta_rule_cpu(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p) {
  const int64_t dk = p.key_dim, dv = p.value_dim, group = p.value_heads / p.key_heads;
  const int64_t state_size = dk * dv;  // the front end checked the state's byte count
  ctx.pool().parallel_for(p.value_heads, 1, [&](int64_t begin, int64_t end) {
    float* qn = ctx.scratch_of<float>(0, checked_mul(int64_t{2}, dk, "gated_delta_rule"));
    float* kn = qn + dk;
    for (int64_t h = begin; h < end; ++h) {
      const int64_t kh = h / group;
      float* S = p.state + h * state_size;
      for (int64_t t = 0; t < p.tokens; ++t) {
        const float* q = p.q + (t * p.key_heads + kh) * dk;
        const float* k = p.k + (t * p.key_heads + kh) * dk;
        const float* v = p.v + (t * p.value_heads + h) * dv;
        const float kq = normalized_qk(q, k, dk, p.scale, p.l2norm_qk, qn, kn);
        const float decay = std::exp(p.g[t * p.value_heads + h]);
        const float beta = p.beta[t * p.value_heads + h];
        delta_rule_step(qn, kn, kq, v, decay, beta, S, dk, dv, p.out + (t * p.value_heads + h) * dv);
      }
    }
  });
}

}  // namespace kiln::cpu
