// composite::scaled_dot_product_attention and attention_decode: the scores as a
// matmul, masks as additive biases, softmax, and a second matmul, all materialised.
#include <cmath>
#include <limits>

#include "kiln/error.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "ops/composite/composite_util.h"

namespace kiln::composite {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

// K or V [..., h, S, E] with each head repeated `heads / h` times in a row
// (repeat_interleave on dim -3): query head i reads K/V head i / (heads / h).
Tensor repeat_heads(const Tensor& t, int64_t heads) {
  const int64_t h = t.size(-3);
  if (h == heads) return t;
  Shape grouped = t.unsqueeze(-3).sizes();  // [..., h, 1, S, E]
  grouped[grouped.size() - 3] = heads / h;
  Shape merged = t.sizes();
  merged[merged.size() - 3] = heads;
  return t.unsqueeze(-3).expand(grouped).reshape(merged);
}

// A bool mask as the additive bias it means: 0 where true (attend), -inf where false.
Tensor mask_bias(const Tensor& mask, DType compute) {
  if (mask.dtype() != DType::Bool) return mask.to(compute);
  return masked_fill(zeros(mask.sizes(), compute), logical_not(mask), Scalar(kMinusInf));
}

// Top-left causal alignment: query i sees keys 0..i, so key j > i gets -inf.
Tensor causal_bias(int64_t L, int64_t S, DType compute) {
  const Tensor query_pos = arange(Scalar(L)).unsqueeze(1);
  const Tensor key_pos = arange(Scalar(S)).unsqueeze(0);
  return masked_fill(zeros({L, S}, compute), gt(key_pos, query_pos), Scalar(kMinusInf));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  constexpr const char* op = "composite.scaled_dot_product_attention";
  const DType compute = detail::compute_dtype_of(query, op, "query");
  KILN_CHECK_KIND(key.defined() && value.defined() && key.dtype() == query.dtype() && value.dtype() == query.dtype(),
                  Type, op, "expected query, key and value of one dtype");
  KILN_CHECK_KIND(dropout_p == 0.0, Value, op, "dropout is random; the composite takes dropout_p = 0 only, got {}",
                  dropout_p);
  KILN_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2, op,
             "expected query, key and value with at least 2 dims, got {}, {} and {}", query.shape_str(),
             key.shape_str(), value.shape_str());
  KILN_CHECK(!(is_causal && attn_mask.has_value()), op, "Explicit attn_mask should not be set when is_causal=True");
  const int64_t L = query.size(-2), S = key.size(-2), E = query.size(-1);
  Tensor k = key.to(compute), v = value.to(compute);
  if (enable_gqa) {
    KILN_CHECK(query.dim() >= 3 && key.dim() >= 3 && value.dim() >= 3, op,
               "enable_gqa needs a head dim (-3) on query, key and value");
    const int64_t heads = query.size(-3);
    KILN_CHECK(key.size(-3) >= 1 && value.size(-3) >= 1 && heads % key.size(-3) == 0 && heads % value.size(-3) == 0,
               op, "with enable_gqa the query heads ({}) must be a multiple of the key and value heads", heads);
    k = repeat_heads(k, heads);
    v = repeat_heads(v, heads);
  }

  // The kernels scale q before the product (one rounding per element of q).
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  Tensor scores = matmul(mul(query.to(compute), Scalar(s)), k.transpose(-2, -1));  // [..., L, S]
  if (attn_mask) scores = add(scores, mask_bias(*attn_mask, compute));
  if (is_causal) scores = add(scores, causal_bias(L, S, compute));

  Tensor weights = softmax(scores, -1);
  if (S > 0) {
    // softmax gives NaN where every key is hidden; kiln defines those rows as zeros.
    const Tensor hidden = eq(amax(scores, {-1}, /*keepdim=*/true), Scalar(kMinusInf));
    weights = masked_fill(weights, hidden, Scalar(0.0));
  }
  // S == 0 contracts over nothing: zeros, as nothing can be attended to.
  return matmul(weights, v).to(query.dtype());
}

Tensor attention_decode(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t valid_len,
                        std::optional<double> scale) {
  constexpr const char* op = "composite.attention_decode";
  KILN_CHECK(q.defined() && k_cache.defined() && v_cache.defined() && q.dim() == 3 && k_cache.dim() == 4 &&
                 v_cache.dim() == 4,
             op, "expected q [B, Hq, E], k_cache [B, Hkv, S_max, E] and v_cache [B, Hkv, S_max, Ev]");
  KILN_CHECK_KIND(valid_len >= 0 && valid_len <= k_cache.size(2) && valid_len <= v_cache.size(2), Index, op,
                  "valid_len {} is out of range [0, {}]", valid_len, k_cache.size(2));
  const Tensor out = scaled_dot_product_attention(q.unsqueeze(2), k_cache.narrow(2, 0, valid_len),
                                                  v_cache.narrow(2, 0, valid_len), std::nullopt, 0.0, false, scale,
                                                  /*enable_gqa=*/true);
  return out.squeeze(2);
}

}  // namespace kiln::composite
