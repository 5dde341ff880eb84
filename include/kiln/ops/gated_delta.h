// Gated DeltaNet ops (kiln's own; the linear-attention layer of Qwen3-Next and
// Qwen3.5/3.6, spec/models.md §2.4). Numerics follow transformers' torch reference
// (`torch_causal_conv1d_update`, `torch_recurrent_gated_delta_rule`): everything is
// computed in float32 whatever the input dtype.
//
// causal_conv1d(x [T, C], weight [C, K] or [C, 1, K], conv_state [K-1, C], activation)
//   Depthwise causal conv over the token axis with a carried history:
//   out[t, c] = act(sum_{j<K} weight[c, j] * u[t - (K-1) + j, c]), u = [conv_state; x].
//   conv_state (float32, contiguous) is updated in place to the last K-1 rows of u, so
//   a prompt run whole and then one token per call gives what one call over everything
//   gives. A new sequence starts from a zero state. activation: "silu" or "none".
//   The result has x's dtype (float32, bfloat16 or float16).
//
// gated_delta_gates(a [..., H], b [..., H], A_log [H], dt_bias [H]) -> {g, beta}
//   g = -exp(A_log) * softplus(a + dt_bias) (<= 0: the log of the per-step decay) and
//   beta = sigmoid(b), float32 of a's shape.
//
// gated_delta_rule(q [T, Hk, dk], k [T, Hk, dk], v [T, Hv, dv], g [T, Hv], beta [T, Hv],
//                  state [Hv, dk, dv], use_qk_l2norm_in_kernel, scale) -> out [T, Hv, dv]
//   The recurrent gated delta rule over the T tokens in order, value head h reading key
//   head h / (Hv / Hk) (transformers' repeat_interleave):
//     q, k <- q / sqrt(sum q^2 + 1e-6), k / sqrt(sum k^2 + 1e-6)  (with the flag)
//     q <- q * scale (default dk^-0.5)
//     S <- exp(g_t) S;  delta = beta_t (v_t - S^T k_t);  S <- S + k_t delta^T;  o_t = S^T q_t
//   state (float32, contiguous) is read and updated in place (zeros start a sequence).
//   The result is float32. This is the decode step (one token per call).
//
// gated_delta_rule_chunked(same arguments, chunk_size = 64) -> out [T, Hv, dv]
//   The same rule in the chunked WY form (transformers' torch_chunk_gated_delta_rule),
//   for prompts: per chunk of chunk_size tokens (the last may be shorter) one unit-lower
//   triangular solve (the linalg kernels' register-blocked panel solve, per chunk and
//   head) gives every token's correction at once, then the chunk's outputs and the
//   carried state follow from matrix products. Equal to gated_delta_rule up to float32
//   rounding (a different summation order), with the same state in and out, so a prompt
//   run chunked continues with recurrent decode steps. chunk_size in [1, 64].
//
// delta_net_decode_out(out, qkv, z, a, b, weights, conv_state, state)
//   One decode token of the Gated DeltaNet mixer between its input and output
//   projections, for qkv [1, 2 Hk dk + Hv dv] (the in_proj_qkv row), z [1, Hv, dv] and
//   a, b [1, Hv], with Hk = weights.key_heads and Hv, dk, dv from state [Hv, dk, dv]:
//     mixed   = causal_conv1d(qkv, conv_weight, conv_state, "silu")
//     q, k, v = mixed viewed as [1, Hk, dk], [1, Hk, dk], [1, Hv, dv]
//     g, beta = gated_delta_gates(a, b, A_log, dt_bias)
//     o       = gated_delta_rule(q, k, v, g, beta, state, use_qk_l2norm_in_kernel = true)
//     out     = rms_norm_gated(o, z, norm_weight, norm_eps)                 [1, Hv, dv]
//   bit for bit what those four ops give (they are its test oracle), in one parallel
//   region instead of four. Every tensor float32 and contiguous (a decode step's
//   buffers: a call allocates nothing); conv_state and state are updated in place; out
//   overlaps nothing else. Not differentiable; CPU only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/tensor.h"

namespace kiln {

Tensor causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, const std::string& activation = "silu");

struct DeltaGates {
  Tensor g;     // float32
  Tensor beta;  // float32
};
DeltaGates gated_delta_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias);

Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        Tensor& state, bool use_qk_l2norm_in_kernel = true,
                        std::optional<double> scale = std::nullopt);

struct DeltaNetDecodeWeights {
  Tensor conv_weight;     // [channels, K] or [channels, 1, K]
  Tensor A_log, dt_bias;  // [Hv]
  Tensor norm_weight;     // [dv]
  double norm_eps = 1e-6;
  int64_t key_heads = 0;
};
void delta_net_decode_out(const Tensor& out, const Tensor& qkv, const Tensor& z, const Tensor& a, const Tensor& b,
                          const DeltaNetDecodeWeights& weights, Tensor& conv_state, Tensor& state);

inline constexpr int64_t kMaxDeltaChunkSize = 64;
Tensor gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                Tensor& state, bool use_qk_l2norm_in_kernel = true,
                                std::optional<double> scale = std::nullopt, int64_t chunk_size = kMaxDeltaChunkSize);

}  // namespace kiln
