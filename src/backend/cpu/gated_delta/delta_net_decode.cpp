// The fused Gated DeltaNet decode step (backend::DeltaNetDecodeProblem): the conv, the
// gates, the recurrent rule and the gated RMSNorm of one token in one parallel region.
//
// Unfused, these are four kernel calls, each a parallel region of its own with a few
// microseconds of work next to the rule (the conv of one token is 8192 channels x 4
// taps), so on a busy machine each pays a worker's wake-up. Here one piece is one key
// head with its group of value heads: the conv of the group's q, k and v channels, then
// per value head the gates, the rule (which streams the head's state) and the norm,
// with everything between the steps in the thread's scratch. No piece reads what
// another writes, so the pieces need no barrier. The shared pieces of the unfused
// kernels (gated_delta_kernels.h, the norm family's row kernels, mul_silu) do the
// arithmetic, so the result is theirs bit for bit.
#include <cmath>

#include "backend/cpu/elementwise/activation_fused_kernels.h"
#include "backend/cpu/gated_delta/delta_rule_step.h"
#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "backend/cpu/nn/norm_kernels.h"
#include "kiln/context.h"
#include "kiln/int_math.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

void delta_net_decode_cpu(const ExecutionContext& ctx, const DeltaNetDecodeProblem& p) {
  constexpr const char* op = "delta_net_decode";
  const int64_t dk = p.key_dim, dv = p.value_dim, group = p.value_heads / p.key_heads;
  const int64_t key_width = p.key_heads * dk;  // the front end checked every size product
  const int64_t channels = 2 * key_width + p.value_heads * dv;
  const int64_t state_size = dk * dv;
  const CausalConv1dProblem conv{p.qkv, p.conv_weight, p.conv_state, nullptr, 1, channels, p.kernel, true};
  // Per thread: the conv's taps, the group's conv outputs (q, k, then its value heads'
  // v), the normalised q and k, and one head's rule output and normalised row.
  const int64_t taps_size = checked_mul(p.kernel, kConvBlock, op);
  const int64_t mixed_size = checked_add(2 * dk, checked_mul(group, dv, op), op);
  const int64_t scratch_size = checked_add(checked_add(taps_size, mixed_size, op), 2 * dk + 2 * dv, op);
  ctx.pool().parallel_for(p.key_heads, 1, [&](int64_t begin, int64_t end) {
    float* taps = ctx.scratch_of<float>(0, scratch_size);
    float* mq = taps + taps_size;
    float* mk = mq + dk;
    float* mv = mk + dk;
    float* qn = mv + group * dv;
    float* kn = qn + dk;
    float* o = kn + dk;
    float* work = o + dv;
    for (int64_t j = begin; j < end; ++j) {
      causal_conv1d_channels(conv, j * dk, (j + 1) * dk, taps, mq, 0);
      causal_conv1d_channels(conv, key_width + j * dk, key_width + (j + 1) * dk, taps, mk, 0);
      causal_conv1d_channels(conv, 2 * key_width + j * group * dv, 2 * key_width + (j + 1) * group * dv, taps, mv,
                             0);
      const float kq = normalized_qk(mq, mk, dk, p.scale, /*l2norm=*/true, qn, kn);
      for (int64_t h = j * group; h < (j + 1) * group; ++h) {
        float g = 0.0f, beta = 0.0f;
        delta_gate(p.a[h], p.b[h], p.a_log[h], p.dt_bias[h], &g, &beta);
        float* S = p.state + h * state_size;
        delta_rule_step(qn, kn, kq, mv + (h - j * group) * dv, std::exp(g), beta, S, dk, dv, o);
        // The norm family's gated RMSNorm of a float32 row (RmsNormKind::Gated): the
        // normalised row, times the weight, times silu(z).
        rms_normalize_rows(o, 1, dv, p.norm_eps, static_cast<const float*>(nullptr), work);
        mul_rows(work, p.norm_weight, work, 1, dv);
        mul_silu(work, p.z + h * dv, p.out + h * dv, dv);
      }
    }
  });
}

}  // namespace kiln::cpu
