// Gated DeltaNet kernels: plain loops whose innermost loop runs over contiguous
// channels or value dims, which the compiler vectorises; the work is a few hundred KiB of
// state per layer and token, so the loops are laid out for the state to stay in cache
// rather than hand-tuned with Highway.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/elementwise/activation_fused_kernels.h"
#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

// Channels per conv work item: the block's taps live in a small local table.
constexpr int64_t kConvBlock = 64;

// torch.nn.functional.softplus with beta 1, threshold 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void conv_block(const CausalConv1dProblem& p, int64_t c0, int64_t c1, std::vector<float>& taps) {
  const int64_t K = p.kernel, C = p.channels, n = c1 - c0, hist = K - 1;
  taps.resize(static_cast<size_t>(K * kConvBlock));
  for (int64_t j = 0; j < K; ++j)
    for (int64_t c = 0; c < n; ++c) taps[j * kConvBlock + c] = p.weight[(c0 + c) * K + j];
  float acc[kConvBlock];
  for (int64_t t = 0; t < p.tokens; ++t) {
    std::fill(acc, acc + n, 0.0f);
    for (int64_t j = 0; j < K; ++j) {
      const int64_t src = t - hist + j;  // row of the sequence [state; x]
      const float* row = (src >= 0 ? p.x + src * C : p.state + (hist + src) * C) + c0;
      const float* w = taps.data() + j * kConvBlock;
      for (int64_t c = 0; c < n; ++c) acc[c] += w[c] * row[c];
    }
    float* out = p.out + t * C + c0;
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

void causal_conv1d_cpu(const CausalConv1dProblem& p, ThreadPool& pool) {
  const int64_t blocks = (p.channels + kConvBlock - 1) / kConvBlock;
  pool.parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> taps;
    for (int64_t b = begin; b < end; ++b) {
      conv_block(p, b * kConvBlock, std::min(p.channels, (b + 1) * kConvBlock), taps);
    }
  });
}

void delta_gates_cpu(const DeltaGatesProblem& p, ThreadPool& pool) {
  pool.parallel_for(p.tokens, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t h = 0; h < p.heads; ++h) {
        const int64_t i = t * p.heads + h;
        p.g[i] = -std::exp(p.a_log[h]) * softplus(p.a[i] + p.dt_bias[h]);
        p.beta[i] = 1.0f / (1.0f + std::exp(-p.b[i]));
      }
    }
  });
}

// One value head over every token. Per token the state is read once for both S^T k and
// S^T q, then rewritten once: with S' = d S + k delta^T,
//   S'^T q = d (S^T q) + delta (k . q)   and   delta = beta (v - d S^T k),
// so the output needs no second read of the updated state.
void gated_delta_rule_cpu(const GatedDeltaRuleProblem& p, ThreadPool& pool) {
  const int64_t dk = p.key_dim, dv = p.value_dim, group = p.value_heads / p.key_heads;
  pool.parallel_for(p.value_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(static_cast<size_t>(2 * dk + 3 * dv));
    float* qn = buf.data();
    float* kn = qn + dk;
    float* sk = kn + dk;
    float* sq = sk + dv;
    float* delta = sq + dv;
    for (int64_t h = begin; h < end; ++h) {
      const int64_t kh = h / group;
      float* S = p.state + h * dk * dv;
      for (int64_t t = 0; t < p.tokens; ++t) {
        const float* q = p.q + (t * p.key_heads + kh) * dk;
        const float* k = p.k + (t * p.key_heads + kh) * dk;
        const float* v = p.v + (t * p.value_heads + h) * dv;
        float q_scale = 0.0f, k_scale = 0.0f;
        qk_scales(q, k, dk, p.scale, p.l2norm_qk, &q_scale, &k_scale);
        float kq = 0.0f;
        for (int64_t r = 0; r < dk; ++r) {
          qn[r] = q[r] * q_scale;
          kn[r] = k[r] * k_scale;
          kq += kn[r] * qn[r];
        }
        std::fill(sk, sk + dv, 0.0f);
        std::fill(sq, sq + dv, 0.0f);
        for (int64_t r = 0; r < dk; ++r) {
          const float* row = S + r * dv;
          const float kr = kn[r], qr = qn[r];
          for (int64_t c = 0; c < dv; ++c) {
            sk[c] += row[c] * kr;
            sq[c] += row[c] * qr;
          }
        }
        const float decay = std::exp(p.g[t * p.value_heads + h]);
        const float beta = p.beta[t * p.value_heads + h];
        float* out = p.out + (t * p.value_heads + h) * dv;
        for (int64_t c = 0; c < dv; ++c) {
          delta[c] = beta * (v[c] - decay * sk[c]);
          out[c] = decay * sq[c] + delta[c] * kq;
        }
        for (int64_t r = 0; r < dk; ++r) {
          float* row = S + r * dv;
          const float kr = kn[r];
          for (int64_t c = 0; c < dv; ++c) row[c] = decay * row[c] + kr * delta[c];
        }
      }
    }
  });
}

}  // namespace kiln::cpu
