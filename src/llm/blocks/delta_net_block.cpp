#include "llm/blocks/delta_net_block.h"

#include "kiln/ops/elementwise.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/ops/index.h"
#include "kiln/ops/nn.h"

namespace kiln::llm {

Tensor qwen3_next_qkvz_order(const DeltaNetGeometry& g) {
  // Key group j of the fused output holds [q_j (dk) | k_j (dk) | v (r dv) | z (r dv)],
  // r = Hv / Hk value heads per key head.
  const int64_t dk = g.key_head_dim, r = g.num_value_heads / g.num_key_heads, vg = r * g.value_head_dim;
  const int64_t group = 2 * dk + 2 * vg;
  Tensor order = Tensor::empty({2 * g.key_dim() + 2 * g.value_dim()}, DType::Int64);
  int64_t* o = order.data<int64_t>();
  const int64_t q0 = 0, k0 = g.key_dim(), v0 = 2 * g.key_dim(), z0 = v0 + g.value_dim();
  for (int64_t j = 0; j < g.num_key_heads; ++j) {
    for (int64_t i = 0; i < dk; ++i) {
      o[q0 + j * dk + i] = j * group + i;
      o[k0 + j * dk + i] = j * group + dk + i;
    }
    for (int64_t i = 0; i < vg; ++i) {
      o[v0 + j * vg + i] = j * group + 2 * dk + i;
      o[z0 + j * vg + i] = j * group + 2 * dk + vg + i;
    }
  }
  return order;
}

Tensor qwen3_next_ba_order(const DeltaNetGeometry& g) {
  // Key group j holds [b (r) | a (r)].
  const int64_t r = g.num_value_heads / g.num_key_heads, hv = g.num_value_heads;
  Tensor order = Tensor::empty({2 * hv}, DType::Int64);
  int64_t* o = order.data<int64_t>();
  for (int64_t j = 0; j < g.num_key_heads; ++j) {
    for (int64_t i = 0; i < r; ++i) {
      o[j * r + i] = j * 2 * r + i;
      o[hv + j * r + i] = j * 2 * r + r + i;
    }
  }
  return order;
}

Tensor DeltaNetBlock::forward(const Tensor& h, KvCache& cache, int64_t layer) const {
  const DeltaNetGeometry& g = geometry;
  const int64_t count = h.size(0), kd = g.key_dim(), vd = g.value_dim(), channels = g.conv_channels();
  const int64_t hv = g.num_value_heads;
  const Tensor x = h.to(in_proj_qkv.input_dtype());  // rounded once for every projection
  Tensor qkv, z, b, a;
  if (qkvz_order) {
    // The fused outputs are a few thousand values per token: reordering them costs
    // nothing next to the projections, and works for every weight format.
    const Tensor qkvz = index_select(in_proj_qkv(x), 1, *qkvz_order);
    qkv = qkvz.narrow(1, 0, channels);
    z = qkvz.narrow(1, channels, vd);
    const Tensor ba = index_select(in_proj_b(x), 1, *ba_order);
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
