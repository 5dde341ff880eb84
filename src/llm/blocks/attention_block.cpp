#include "llm/blocks/attention_block.h"

#include <limits>

#include "kiln/ops/attention.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"

namespace kiln::llm {
namespace {

// float32 [T, pos+T] on `device`, 0 where query t (at position pos+t) attends to key j
// (j <= pos+t) and -inf elsewhere: the additive form attention makes of a bool mask,
// built on the host and sent to where the cache lives.
Tensor continuation_mask(int64_t count, int64_t pos, Device device) {
  Tensor key_pos = arange(Scalar(int64_t{0}), Scalar(pos + count)).unsqueeze(0);
  Tensor query_pos = arange(Scalar(pos), Scalar(pos + count)).unsqueeze(1);
  Tensor bias = where(le(key_pos, query_pos), Scalar(0.0), Scalar(-std::numeric_limits<double>::infinity()))
                    .to(DType::Float32);
  return device == kCPU ? bias : bias.to(device);
}

}  // namespace

Tensor AttentionBlock::forward(const Tensor& h, KvCache& cache, int64_t layer, const RopeTables& rope,
                               int64_t pos) const {
  const int64_t count = h.size(0);
  const Tensor x = h.to(q_proj.input_dtype());  // rounded once for the three projections
  // The norms' float32 weights make q and k float32 whatever the projection dtype; the
  // zero-centred norm keeps its input's dtype, so it gets float32 input.
  const auto head_norm = [&](const Tensor& t, const Tensor& w) {
    return zero_centred_norms ? rms_norm_one_plus(t.to(DType::Float32), w, norm_eps) : rms_norm_llama(t, w, norm_eps);
  };
  Tensor gate;
  Tensor q_raw = q_proj(x);
  if (output_gate) {
    const Tensor qg = q_raw.view({count, num_heads, 2 * head_dim});
    q_raw = qg.narrow(2, 0, head_dim);
    gate = qg.narrow(2, head_dim, head_dim);
  } else {
    q_raw = q_raw.view({count, num_heads, head_dim});
  }
  Tensor q = head_norm(q_raw, q_norm);
  Tensor k = head_norm(k_proj(x).view({count, num_kv_heads, head_dim}), k_norm);
  Tensor v = v_proj(x).view({count, num_kv_heads, head_dim});
  q = apply_rotary_emb_cos_sin(q, rope.cos, rope.sin);
  k = apply_rotary_emb_cos_sin(k, rope.cos, rope.sin);
  cache.write(layer, pos, k, v);

  // Attention runs in the cache's dtype (q, k, v share one dtype), accumulating in float32.
  return attend(q.to(cache.dtype()), gate, cache, layer, pos);
}

Tensor AttentionBlock::attend(const Tensor& q, const Tensor& gate, KvCache& cache, int64_t layer, int64_t pos) const {
  const int64_t count = q.size(0);
  const Tensor& keys = cache.keys(layer);
  const Tensor& values = cache.values(layer);
  Tensor out;
  if (count == 1) {
    out = attention_decode(q, keys, values, pos + 1);  // [1, heads, head_dim]
  } else {
    Tensor q4 = q.transpose(0, 1).unsqueeze(0);  // [1, heads, T, head_dim]
    Tensor k4 = keys.narrow(2, 0, pos + count);
    Tensor v4 = values.narrow(2, 0, pos + count);
    Tensor o4 = pos == 0 ? scaled_dot_product_attention(q4, k4, v4, std::nullopt, 0.0, /*is_causal=*/true,
                                                         std::nullopt, /*enable_gqa=*/true)
                         : scaled_dot_product_attention(q4, k4, v4, continuation_mask(count, pos, keys.device()), 0.0, false,
                                                         std::nullopt, /*enable_gqa=*/true);
    out = o4.select(0, 0).transpose(0, 1);  // [T, heads, head_dim]
  }
  if (output_gate) out = mul(out.to(DType::Float32), sigmoid(gate.to(DType::Float32)));
  return o_proj(out.reshape({count, num_heads * head_dim}));
}

int64_t AttentionBlock::decode_bytes() const {
  return q_proj.bytes() + k_proj.bytes() + v_proj.bytes() + o_proj.bytes() +
         static_cast<int64_t>(q_norm.nbytes() + k_norm.nbytes());
}

}  // namespace kiln::llm
