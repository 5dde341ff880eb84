// The Gated DeltaNet token mixer of Qwen3-Next and Qwen3.5/3.6 (spec: models.md §2.4,
// transformers' Qwen3NextGatedDeltaNet / Qwen3_5MoeGatedDeltaNet):
//
//   qkv, z, b, a = projections of h     (Qwen3.5: in_proj_qkv/z/b/a, flat;
//                                        Qwen3-Next: in_proj_qkvz/ba grouped by key
//                                        head, put into the flat order per call)
//   qkv     = silu(causal depthwise conv, kernel K, over [q | k | v])  carried history
//   q, k, v = split(qkv) as [T, Hk, dk], [T, Hk, dk], [T, Hv, dv]
//   g, beta = -exp(A_log) softplus(a + dt_bias), sigmoid(b)
//   o       = gated delta rule (L2-normalised q/k, q scaled by dk^-0.5)   carried state
//   o       = rms_norm(o per value head, norm.weight) * silu(z)
//   return    out_proj(o flattened)
//
// The conv history and the recurrent state live in the sequence's KvCache, so a prompt
// split into pieces and token-by-token decode compute what one pass computes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "kiln/tensor.h"
#include "llm/config.h"
#include "llm/kv_cache.h"
#include "llm/weights.h"

namespace kiln::llm {

struct DeltaNetBlock {
  DeltaNetGeometry geometry;
  // Qwen3.5: four flat projections. Qwen3-Next: in_proj_qkv holds the fused
  // in_proj_qkvz [2 key_dim + 2 value_dim, H] and in_proj_b the fused in_proj_ba [2 Hv, H];
  // in_proj_z / in_proj_a stay empty and grouped_by_key_head is set.
  Linear in_proj_qkv, in_proj_z, in_proj_b, in_proj_a;
  // Qwen3-Next: the fused outputs hold [q_j | k_j | v_j | z_j] and [b_j | a_j] per key
  // head j, regrouped into Qwen3.5's flat [q | k | v | z] and [b | a] per call.
  bool grouped_by_key_head = false;
  Tensor conv_weight;                // float32 [conv_channels, K]
  Tensor A_log, dt_bias;             // float32 [Hv]
  Tensor norm_weight;                // float32 [dv], a plain scale
  Linear out_proj;                   // [H, value_dim]
  double norm_eps = 1e-6;

  // h: float32 [T, H] (normalised); updates the layer's conv and recurrent state.
  // Returns [T, H] in out_proj's output dtype.
  Tensor forward(const Tensor& h, KvCache& cache, int64_t layer) const;
  // Weight bytes one decode step reads, plus the recurrent state it reads and writes.
  int64_t decode_bytes() const;
};

// `fused` [T, key_heads * sum(widths)] holds, per key head j, pieces of `widths` columns
// in order; writes `flat` (same shape) in the flat layout [piece 0 of every head | piece 1
// of every head | ...] (transformers' fix_query_key_value_ordering). Each piece is a
// strided view copied into place: data movement only, and no index tensor (a device
// would read one back to check its range).
void ungroup_by_key_head(const Tensor& fused, int64_t key_heads, std::initializer_list<int64_t> widths,
                         const Tensor& flat);

}  // namespace kiln::llm
