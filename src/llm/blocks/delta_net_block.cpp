#include "llm/blocks/delta_net_block.h"

#include "kiln/ops/elementwise.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/ops/nn.h"

namespace kiln::llm {

void ungroup_by_key_head(const Tensor& fused, int64_t key_heads, std::initializer_list<int64_t> widths,
                         const Tensor& flat) {
  const Tensor grouped = fused.unflatten(1, {key_heads, fused.size(1) / key_heads});
  int64_t from = 0, to = 0;
  for (const int64_t width : widths) {
    flat.narrow(1, to, key_heads * width).unflatten(1, {key_heads, width}).copy_(grouped.narrow(2, from, width));
    from += width;
    to += key_heads * width;
  }
}

namespace {

Tensor ungrouped_by_key_head(const Tensor& fused, int64_t key_heads, std::initializer_list<int64_t> widths) {
  Tensor flat = Tensor::empty(fused.sizes(), fused.dtype(), fused.device());
  ungroup_by_key_head(fused, key_heads, widths, flat);
  return flat;
}

}  // namespace

Tensor DeltaNetBlock::forward(const Tensor& h, KvCache& cache, int64_t layer) const {
  const DeltaNetGeometry& g = geometry;
  const int64_t count = h.size(0), kd = g.key_dim(), vd = g.value_dim(), channels = g.conv_channels();
  const int64_t hv = g.num_value_heads;
  const Tensor x = h.to(in_proj_qkv.input_dtype());  // rounded once for every projection
  Tensor qkv, z, b, a;
  if (grouped_by_key_head) {
    // The fused outputs are a few thousand values per token: regrouping them costs
    // nothing next to the projections, and works for every weight format.
    const int64_t hk = g.num_key_heads, r = hv / hk;
    const Tensor qkvz =
        ungrouped_by_key_head(in_proj_qkv(x), hk, {g.key_head_dim, g.key_head_dim, r * g.value_head_dim,
                                                 r * g.value_head_dim});
    qkv = qkvz.narrow(1, 0, channels);
    z = qkvz.narrow(1, channels, vd);
    const Tensor ba = ungrouped_by_key_head(in_proj_b(x), hk, {r, r});
    b = ba.narrow(1, 0, hv);
    a = ba.narrow(1, hv, hv);
  } else {
    qkv = in_proj_qkv(x);
    z = in_proj_z(x);
    b = in_proj_b(x);
    a = in_proj_a(x);
  }
  const Tensor mixed = causal_conv1d(qkv.to(DType::Float32), conv_weight, cache.delta_conv_state(layer), "silu");
  const Tensor q = mixed.narrow(1, 0, kd).reshape({count, g.num_key_heads, g.key_head_dim});
  const Tensor k = mixed.narrow(1, kd, kd).reshape({count, g.num_key_heads, g.key_head_dim});
  const Tensor v = mixed.narrow(1, 2 * kd, vd).reshape({count, hv, g.value_head_dim});
  const DeltaGates gates = gated_delta_gates(a, b, A_log, dt_bias);
  // A prompt takes the chunked WY form (matrix-shaped work per chunk of 64); a decode
  // step the recurrent one (one read and write of the state). Both carry the same state.
  Tensor& state = cache.delta_recurrent_state(layer);
  constexpr bool l2norm_qk = true;
  const Tensor o = count > 1 ? gated_delta_rule_chunked(q, k, v, gates.g, gates.beta, state, l2norm_qk)
                             : gated_delta_rule(q, k, v, gates.g, gates.beta, state, l2norm_qk);
  const Tensor normed = rms_norm_gated(o, z.to(DType::Float32).reshape({count, hv, g.value_head_dim}), norm_weight,
                                       norm_eps);
  return out_proj(normed.reshape({count, vd}));
}

int64_t DeltaNetBlock::decode_bytes() const {
  const int64_t state = geometry.num_value_heads * geometry.key_head_dim * geometry.value_head_dim * 4;
  const auto bytes = [](const Linear& l) { return l.weight.defined() ? l.bytes() : int64_t{0}; };
  return bytes(in_proj_qkv) + bytes(in_proj_z) + bytes(in_proj_b) + bytes(in_proj_a) + bytes(out_proj) +
         static_cast<int64_t>(conv_weight.nbytes() + A_log.nbytes() + dt_bias.nbytes() + norm_weight.nbytes()) +
         2 * state;
}

}  // namespace kiln::llm
