#include "llm/blocks/attention_block.h"

#include "kiln/ops/attention.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"

namespace kiln::llm {
namespace {

// bool [T, pos+T]: query t (at position pos+t) attends to keys 0 .. pos+t.
Tensor continuation_mask(int64_t count, int64_t pos) {
  Tensor key_pos = arange(Scalar(int64_t{0}), Scalar(pos + count)).unsqueeze(0);
  Tensor query_pos = arange(Scalar(pos), Scalar(pos + count)).unsqueeze(1);
  return le(key_pos, query_pos);
}

}  // namespace

Tensor AttentionBlock::forward(const Tensor& h, KvCache& cache, int64_t layer, const RopeTables& rope,
                               int64_t pos) const {
  const int64_t count = h.size(0);
  const Tensor x = h.to(q_proj.input_dtype());  // rounded once for the three projections
  // The norms' float32 weights make q and k float32 whatever the projection dtype.
  Tensor q = rms_norm_llama(q_proj(x).view({count, num_heads, head_dim}), q_norm, norm_eps);
  Tensor k = rms_norm_llama(k_proj(x).view({count, num_kv_heads, head_dim}), k_norm, norm_eps);
  Tensor v = v_proj(x).view({count, num_kv_heads, head_dim});
  q = apply_rotary_emb_cos_sin(q, rope.cos, rope.sin);
  k = apply_rotary_emb_cos_sin(k, rope.cos, rope.sin);
  cache.write(layer, pos, k, v);

  // Attention runs in the cache's dtype (q, k, v share one dtype), accumulating in float32.
  const Tensor& keys = cache.keys(layer);
  const Tensor& values = cache.values(layer);
  q = q.to(cache.dtype());
  Tensor out;
  if (count == 1) {
    out = attention_decode(q, keys, values, pos + 1);  // [1, heads, head_dim]
  } else {
    Tensor q4 = q.transpose(0, 1).unsqueeze(0);  // [1, heads, T, head_dim]
    Tensor k4 = keys.narrow(2, 0, pos + count);
    Tensor v4 = values.narrow(2, 0, pos + count);
    Tensor o4 = pos == 0 ? scaled_dot_product_attention(q4, k4, v4, std::nullopt, 0.0, /*is_causal=*/true,
                                                         std::nullopt, /*enable_gqa=*/true)
                         : scaled_dot_product_attention(q4, k4, v4, continuation_mask(count, pos), 0.0, false,
                                                         std::nullopt, /*enable_gqa=*/true);
    out = o4.select(0, 0).transpose(0, 1);  // [T, heads, head_dim]
  }
  return o_proj(out.reshape({count, num_heads * head_dim}));
}

int64_t AttentionBlock::decode_bytes() const {
  return q_proj.bytes() + k_proj.bytes() + v_proj.bytes() + o_proj.bytes() +
         static_cast<int64_t>(q_norm.nbytes() + k_norm.nbytes());
}

}  // namespace kiln::llm
