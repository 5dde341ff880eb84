// Unfused composites of kiln's fused ops: each one is the fused op written with simpler
// public ops only (matmul, elementwise, softmax, reductions, index ops, to()). Like the
// reference versions MLX keeps of its fast ops, they are the readable definition of
// what a fused kernel computes, dtype handling included, and the oracle the tests
// compare the kernels against.
//
// Same arguments, result shape and result dtype as the fused op of the same name in
// namespace kiln. The values agree with it within rounding, not bit for bit: the fused
// kernels sum in other orders and evaluate exp with their own polynomial. Slow by
// design: every intermediate is materialised (the L x S attention scores, each
// expert's activations, dequantised weights).
//
// Deliberate differences from the fused ops:
//  - Validation is limited to what keeps the result meaningful; other mistakes surface
//    as the simpler ops' errors (a broadcast or matmul shape error, say), not with the
//    fused op's wording.
//  - float8_e4m3fn codes 0x7F/0xFF read as NaN (to() is exact); the fused kernels read
//    them as ±480. Quantisation never produces them.
//  - scaled_dot_product_attention takes no dropout (dropout_p must be 0): the fused
//    kernel's random stream is not something simpler ops can reproduce.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/ops/gated_delta.h"
#include "kiln/ops/moe.h"
#include "kiln/tensor.h"

namespace kiln::composite {

// silu(x[..., :I]) * x[..., I:], computed in float32 (float64 for float64 input) and
// rounded once to the input's dtype.
Tensor silu_and_mul(const Tensor& input);

// The normalisations of kiln/ops/nn.h. Each computes r = rsqrt(mean(x^2) + eps) over the
// normalised dims in float32 (float64 when an operand is float64), then applies the
// rounding steps of its variant:
//   rms_norm           round_out((x r) w)
//   rms_norm_llama     w * round_in(x r), in promote_types(input, weight)
//   rms_norm_one_plus  round_in((x r) (1 + w))
//   rms_norm_gated     round_in(round_{promote(in, w)}(w round_in(x r)) silu(gate))
//   layer_norm         round_in(((x - mean) rsqrt(var + eps)) w + b), var biased
// eps reaches a float32 computation as a float (PyTorch's rule).
Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);
Tensor rms_norm_llama(const Tensor& input, const Tensor& weight, double eps);
Tensor rms_norm_one_plus(const Tensor& input, const Tensor& weight, double eps);
Tensor rms_norm_gated(const Tensor& input, const Tensor& gate, const Tensor& weight, double eps);
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape,
                  const std::optional<Tensor>& weight = std::nullopt, const std::optional<Tensor>& bias = std::nullopt,
                  double eps = 1e-5);

// x [..., K] @ (float(W) * s)^T + b for a float8_e4m3fn weight [N, K] with float32 scales
// per row [N] or per 128x128 block [ceil(N/128), ceil(K/128)]; float32 throughout,
// rounded once to the input's dtype.
Tensor linear_fp8(const Tensor& input, const Tensor& weight, const Tensor& scale,
                  const std::optional<Tensor>& bias = std::nullopt);

// softmax(q k^T * scale + bias) v in float32 (float64 for float64), with q scaled before
// the product as the kernels do; bool masks become 0 / -inf biases, is_causal hides key
// j > i, enable_gqa repeats each K/V head over its group of query heads, and rows whose
// every key is hidden give zeros. dropout_p must be 0 (Value error otherwise).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask = std::nullopt, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false);

// The decode step: the caches narrowed to [0, valid_len), then the attention above with
// one query row per head and GQA.
Tensor attention_decode(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t valid_len,
                        std::optional<double> scale = std::nullopt);

// y[t] = sum_j weights[t, j] * down_e(silu(gate_e x_t) * up_e x_t), e = ids[t, j], plus
// sigmoid(x_t . gate_weight) * shared(x_t) with a shared expert: one expert at a time
// over the tokens routed to it (index_select, then index_add), float32 throughout,
// rounded once to x's dtype.
Tensor moe_experts(const Tensor& x, const Tensor& weights, const Tensor& ids, const MoeExperts& experts,
                   const std::optional<SharedExpert>& shared = std::nullopt);

// The Gated DeltaNet ops of kiln/ops/gated_delta.h: the conv as K shifted products of
// [conv_state; x]; the gates from exp, softplus and sigmoid; the delta rule as
// transformers' torch_recurrent_gated_delta_rule writes it (key heads repeated with
// index_select, L2 norm from sum and rsqrt, per token bmm reads and a bmm outer-product
// update). float32 throughout; the states are updated in place like the fused ops'.
Tensor causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, const std::string& activation = "silu");
DeltaGates gated_delta_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias);
Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        Tensor& state, bool use_qk_l2norm_in_kernel = true,
                        std::optional<double> scale = std::nullopt);

}  // namespace kiln::composite
