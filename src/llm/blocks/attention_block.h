// Grouped-query self-attention with per-head q/k RMSNorm and RoPE, reading and writing
// the sequence's KV cache (spec: models.md §0.2, §0.3, §1.2 steps 2-6, §3.2 attention).
//
//   q, k, v = h Wq^T, h Wk^T, h Wv^T  viewed [T, heads, head_dim]
//   q, k    = rms_norm_llama per head (q_norm / k_norm [head_dim]), then RoPE
//             (rotate_half over the whole head, tables shared by every layer)
//   cache[pos .. pos+T-1] = k, v  (rotated keys)
//   out     = softmax(q k^T / sqrt(head_dim) + causal) v over cache[0 .. pos+T-1]
//   return    out Wo^T
// Qwen3-Next / Qwen3.5 gated attention (§2.3): q_proj yields [query | gate] per head,
// the q/k norms scale by (1 + w), RoPE turns only the first rotary_dim dims of each head
// (the tables decide the width), and the attention output is multiplied by
// sigmoid(gate) before o_proj.
// One token runs attention_decode straight on the cache; several run the tiled
// scaled_dot_product_attention (is_causal from position 0, an explicit mask when the
// block continues a sequence: query t sees keys 0 .. pos+t).
#pragma once

#include <cstdint>

#include "kiln/ops/nn.h"
#include "kiln/tensor.h"
#include "llm/kv_cache.h"
#include "llm/weights.h"

namespace kiln::llm {

struct AttentionBlock {
  Linear q_proj, k_proj, v_proj, o_proj;
  Tensor q_norm, k_norm;  // float32 [head_dim]
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double norm_eps = 1e-6;
  bool output_gate = false;         // q_proj rows: per head [query head_dim | gate head_dim]
  bool zero_centred_norms = false;  // q_norm / k_norm scale by (1 + w)

  // h: float32 [T, hidden] (already normalised); rope: tables for positions pos ..
  // pos+T-1. Returns [T, hidden] in o_proj's output dtype.
  Tensor forward(const Tensor& h, KvCache& cache, int64_t layer, const RopeTables& rope, int64_t pos) const;
  // The rest of the block once q (rotated, in the cache dtype, [T, heads, head_dim]) is
  // formed and k, v are in the cache: attention over cache[0 .. pos+T-1], the output gate
  // (gate: [T, heads, head_dim] of any float dtype, or undefined), o_proj. The fused
  // one-token entry (AttentionEntryDecode) ends here too.
  Tensor attend(const Tensor& q, const Tensor& gate, KvCache& cache, int64_t layer, int64_t pos) const;
  // Weight bytes one decode step reads.
  int64_t decode_bytes() const;
};

}  // namespace kiln::llm
