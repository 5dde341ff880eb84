// Ops that write their result into a tensor the caller owns, ATen's `_out` convention
// (the output first): what a decode loop uses to run every token with buffers sized once,
// so that a steady-state token takes no memory from the allocator.
//
// Each computes exactly what the op of the same name without `_out` returns (same
// kernel, same rounding), and checks its inputs the same way. `out` must already have
// the shape and dtype that op would return, be contiguous, live on the inputs' device
// and not overlap any input (sigmoid_out and silu_out may write over their own input:
// each element is read before it is written). None of them is differentiable: an input
// that requires grad while grad mode is on is refused, as PyTorch refuses out= there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/ops/gated_delta.h"  // DeltaGates
#include "kiln/tensor.h"

namespace kiln {

// linear(input, weight, bias) into out [..., N] (input's dtype).
void linear_out(const Tensor& out, const Tensor& input, const Tensor& weight,
                const std::optional<Tensor>& bias = std::nullopt);
// linear_fp8(input, weight, scale, bias) into out [..., N] (input's dtype).
void linear_fp8_out(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& scale,
                    const std::optional<Tensor>& bias = std::nullopt);
// rms_norm_llama(input, weight, eps) into out (dtype promote(input, weight)).
void rms_norm_llama_out(const Tensor& out, const Tensor& input, const Tensor& weight, double eps);
// torch's rms_norm(input, [weight.size(0)], weight, eps) into out (input's dtype); with
// weight = 1 + w formed once, this is rms_norm_one_plus(input, w, eps).
void rms_norm_out(const Tensor& out, const Tensor& input, const Tensor& weight, double eps);
// attention_decode(q, k_cache, v_cache, valid_len, scale) into out [B, Hq, Ev] (q's dtype).
void attention_decode_out(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          int64_t valid_len, std::optional<double> scale = std::nullopt);
// sigmoid(input) and silu(input) for a floating input, into out of its dtype and shape.
void sigmoid_out(const Tensor& out, const Tensor& input);
void silu_out(const Tensor& out, const Tensor& input);
// index_select(input, dim, index) into out (input's dtype).
void index_select_out(const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index);
// rms_norm_gated(input, gate, weight, eps) into out (input's dtype).
void rms_norm_gated_out(const Tensor& out, const Tensor& input, const Tensor& gate, const Tensor& weight, double eps);
// causal_conv1d(x, weight, conv_state, activation) into out [tokens, channels] (x's dtype;
// allocates nothing for float32 x, whose result the kernel writes directly).
void causal_conv1d_out(const Tensor& out, const Tensor& x, const Tensor& weight, Tensor& conv_state,
                       const std::string& activation);
// gated_delta_gates(a, b, A_log, dt_bias) into g and beta (float32, a's shape).
void gated_delta_gates_out(const Tensor& g, const Tensor& beta, const Tensor& a, const Tensor& b, const Tensor& A_log,
                           const Tensor& dt_bias);
// gated_delta_rule(q, k, v, g, beta, state, ...) into out float32 [tokens, value_heads, value_dim].
void gated_delta_rule_out(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, Tensor& state, bool use_qk_l2norm_in_kernel = false,
                          std::optional<double> scale = std::nullopt);

}  // namespace kiln
