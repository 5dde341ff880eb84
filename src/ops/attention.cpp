// scaled_dot_product_attention and attention_decode: validation and broadcasting, then
// the attention kernel of the device (backend/attention.h). No copy of q, k or v is made
// unless an operand's last dim is strided; a mask is converted once to an additive bias
// of its own (unbroadcast) shape when it is bool or of another dtype than the compute
// dtype.
#include "kiln/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/attention.h"
#include "backend/random.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/generator.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/type_promotion.h"
#include "ops/autograd_hooks.h"
#include "ops/op_utils.h"
#include "ops/out_checks.h"
#include "kiln/ops/out_variants.h"

namespace kiln {

namespace {

constexpr const char* kSdpa = "scaled_dot_product_attention";

bool supported_dtype(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16 || t == DType::Float16;
}

void check_qkv_dtypes(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  common_device(op, {&q, &k, &v});
  KILN_CHECK_KIND(q.dtype() == k.dtype() && q.dtype() == v.dtype(), Type, op,
                  "Expected query, key, and value to have the same dtype, but got query.dtype: {} key.dtype: {} and "
                  "value.dtype: {} instead.",
                  dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype()));
  KILN_CHECK_KIND(supported_dtype(q.dtype()), Type, op,
                  "expected query, key and value of dtype float32, float64, bfloat16 or float16, got {}",
                  dtype_name(q.dtype()));
}

// The kernels read each row's last dim with unit stride.
Tensor with_unit_last_stride(const Tensor& t) { return t.size(-1) <= 1 || t.stride(-1) == 1 ? t : t.contiguous(); }

// Element offset of each output batch row (row-major over out_batch) in x, whose dims
// before its last two align right with out_batch and are 1 (broadcast) or equal.
// With gqa_group > 0 the last batch dim (heads) maps output head h to h / gqa_group.
std::vector<int64_t> row_offsets(const Tensor& x, int64_t x_batch_dims, const Shape& out_batch, int64_t gqa_group) {
  const int64_t nb = static_cast<int64_t>(out_batch.size());
  const int64_t rows = shape_numel(out_batch);
  std::vector<int64_t> offsets(static_cast<size_t>(rows), 0);
  std::vector<int64_t> idx(static_cast<size_t>(nb), 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0;
    for (int64_t d = 0; d < nb; ++d) {
      const int64_t xd = d - (nb - x_batch_dims);
      if (xd < 0 || x.size(xd) == 1) continue;
      int64_t i = idx[static_cast<size_t>(d)];
      if (gqa_group > 0 && d == nb - 1) i /= gqa_group;
      off += i * x.stride(xd);
    }
    offsets[static_cast<size_t>(r)] = off;
    for (int64_t d = nb - 1; d >= 0; --d) {  // next multi-index, row-major
      if (++idx[static_cast<size_t>(d)] < out_batch[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return offsets;
}

// The mask as an additive bias in the compute dtype, same shape as the mask: a bool
// mask gives 0 where attention is allowed and -inf elsewhere (exact in any dtype).
Tensor mask_to_bias(const Tensor& mask, DType compute) {
  if (mask.dtype() != DType::Bool) return mask.to(compute);
  return where(mask, Scalar(0.0), Scalar(-std::numeric_limits<double>::infinity())).to(compute);
}

// is_causal as the 0 / -inf bias PyTorch's math path adds: query i sees keys 0..i.
Tensor causal_bias(int64_t L, int64_t S, DType compute) {
  return mask_to_bias(ge(arange(Scalar(L)).unsqueeze(1), arange(Scalar(S)).unsqueeze(0)), compute);
}

}  // namespace

namespace {

// scaled_dot_product_attention, into `into` when given (attention_decode_out: already
// checked to have the result's shape, dtype and device, contiguous, overlapping nothing).
Tensor sdpa_impl(const Tensor& query, const Tensor& key, const Tensor& value, const std::optional<Tensor>& attn_mask,
                 double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa, const Tensor* into) {
  check_defined(query, kSdpa, "query");
  check_defined(key, kSdpa, "key");
  check_defined(value, kSdpa, "value");
  check_qkv_dtypes(query, key, value, kSdpa);
  KILN_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2, kSdpa,
             "expected query, key and value with at least 2 dims, got query {}, key {} and value {}",
             query.shape_str(), key.shape_str(), value.shape_str());
  KILN_CHECK(query.size(-1) == key.size(-1), kSdpa,
             "query and key must have the same embedding dim (last dim), got query {} and key {}", query.shape_str(),
             key.shape_str());
  KILN_CHECK(key.size(-2) == value.size(-2), kSdpa,
             "key and value must have the same sequence length (dim -2), got key {} and value {}", key.shape_str(),
             value.shape_str());
  KILN_CHECK_KIND(dropout_p >= 0.0 && dropout_p <= 1.0, Value, kSdpa, "dropout_p must be in [0, 1], got {}",
                  dropout_p);
  KILN_CHECK(!(is_causal && attn_mask.has_value()), kSdpa,
             "Explicit attn_mask should not be set when is_causal=True");
  const double softmax_scale = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));

  Shape q_batch(query.sizes().begin(), query.sizes().end() - 2);
  Shape k_batch(key.sizes().begin(), key.sizes().end() - 2);
  Shape v_batch(value.sizes().begin(), value.sizes().end() - 2);
  int64_t k_group = 0, v_group = 0;
  if (enable_gqa) {
    KILN_CHECK(query.dim() >= 3 && key.dim() >= 3 && value.dim() >= 3, kSdpa,
               "enable_gqa needs a head dim (-3) on query, key and value, got query {}, key {} and value {}",
               query.shape_str(), key.shape_str(), value.shape_str());
    const int64_t hq = query.size(-3), hk = key.size(-3), hv = value.size(-3);
    KILN_CHECK(hk >= 1 && hv >= 1 && hq % hk == 0 && hq % hv == 0, kSdpa,
               "with enable_gqa the number of query heads ({}) must be divisible by the number of key heads ({}) "
               "and value heads ({})",
               hq, hk, hv);
    k_group = hq / hk;
    v_group = hq / hv;
    k_batch.back() = hq;
    v_batch.back() = hq;
  }
  const Shape out_batch = broadcast_shapes({q_batch, k_batch, v_batch}, kSdpa);
  const int64_t L = query.size(-2), S = key.size(-2), E = query.size(-1), Ev = value.size(-1);
  Shape out_shape = out_batch;
  out_shape.push_back(L);
  out_shape.push_back(Ev);

  const DType compute = compute_dtype(query.dtype());
  Tensor bias;
  if (attn_mask.has_value()) {
    const Tensor& mask = *attn_mask;
    check_defined(mask, kSdpa, "attn_mask");
    common_device(kSdpa, {&query, &mask});
    KILN_CHECK_KIND(mask.dtype() == DType::Bool || mask.dtype() == DType::Float32 || mask.dtype() == query.dtype(),
                    Type, kSdpa,
                    "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
                    "{} and query.dtype: {} instead.",
                    dtype_name(mask.dtype()), dtype_name(query.dtype()));
    Shape target = out_batch;
    target.push_back(L);
    target.push_back(S);
    bool ok = mask.dim() <= static_cast<int64_t>(target.size());
    for (int64_t d = 1; ok && d <= mask.dim(); ++d) {
      const int64_t m = mask.size(-d), t = target[target.size() - static_cast<size_t>(d)];
      ok = m == 1 || m == t;
    }
    KILN_CHECK(ok, kSdpa, "attn_mask of shape {} does not broadcast to the attention shape {}", mask.shape_str(),
               shape_to_string(target));
    // A 0-dim CPU mask may join device operands (like a number): it goes up here.
    bias = on_device(mask_to_bias(mask, compute), query.device());
  }
  if (is_causal && !std::isfinite(softmax_scale)) {
    // The kernels never read the keys is_causal hides, which is the same as adding -inf
    // to finite scores. With a NaN or infinite scale the hidden scores are NaN or +-inf,
    // and PyTorch's math path adds -inf to them (NaN and +inf give a NaN row): the mask
    // goes in as that bias so every score is computed.
    bias = on_device(causal_bias(L, S, compute), query.device());
    is_causal = false;
  }

  Tensor out = into != nullptr ? *into : Tensor::empty(out_shape, query.dtype(), query.device(), kSdpa);
  if (out.numel() == 0) return out;
  if (S == 0 || dropout_p == 1.0) {
    // Nothing to attend to, or every weight dropped: zeros (kiln decisions 5 and 6).
    out.zero_();
    return out;
  }

  const auto kernel = backend::attention_kernels.on(query.device(), kSdpa).attention;
  const ExecutionContext ctx = current_context();
  const Tensor q = with_unit_last_stride(query);
  const Tensor k = with_unit_last_stride(key);
  const Tensor v = with_unit_last_stride(value);
  const std::vector<int64_t> q_off = row_offsets(q, q.dim() - 2, out_batch, 0);
  const std::vector<int64_t> k_off = row_offsets(k, k.dim() - 2, out_batch, k_group);
  const std::vector<int64_t> v_off = row_offsets(v, v.dim() - 2, out_batch, v_group);

  backend::AttentionProblem p;
  p.dtype = query.dtype();
  p.rows = shape_numel(out_batch);
  p.L = L;
  p.S = S;
  p.E = E;
  p.Ev = Ev;
  p.scale = softmax_scale;
  p.causal = is_causal;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.out = out.data_ptr();
  p.q_offset = q_off.data();
  p.k_offset = k_off.data();
  p.v_offset = v_off.data();
  p.q_stride_l = q.stride(-2);
  p.k_stride_s = k.stride(-2);
  p.v_stride_s = v.stride(-2);

  std::vector<int64_t> bias_off;
  if (bias.defined()) {
    const int64_t bd = bias.dim();
    bias_off = row_offsets(bias, bd >= 2 ? bd - 2 : 0, out_batch, 0);
    p.bias = bias.data_ptr();
    p.bias_offset = bias_off.data();
    p.bias_stride_l = bd >= 2 && bias.size(-2) != 1 ? bias.stride(-2) : 0;
    p.bias_stride_s = bd >= 1 && bias.size(-1) != 1 ? bias.stride(-1) : 0;
  }
  if (dropout_p > 0) {
    Generator& g = ctx.generator();
    p.dropout_p = dropout_p;
    const int64_t weights = checked_mul(checked_mul(p.rows, L, kSdpa), S, kSdpa);
    p.dropout_key = {g.seed(), g.advance(backend::uniform_blocks(weights))};
  }
  const OpProfile profile(kSdpa, [&] {
    // Q, K, V and the output; QK^T and PV: 2 FLOPs per multiply-add each, over the
    // (query, key) pairs the kernel computes: with is_causal query i sees min(i + 1, S)
    // keys, so a square prompt costs about half of L * S.
    const double l = static_cast<double>(L), s = static_cast<double>(S), m = std::min(l, s);
    const double pairs = is_causal ? m * (m + 1) / 2 + (l - m) * s : l * s;
    return OpCost{tensor_bytes({&q, &k, &v, &out}),
                  2.0 * static_cast<double>(p.rows) * pairs * static_cast<double>(E + Ev)};
  });
  kernel(ctx, p);
  return out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  KILN_AUTOGRAD(scaled_dot_product_attention, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  return sdpa_impl(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, nullptr);
}

namespace {

// attention_decode's checks and its SDPA call, into `out` [B, Hq, Ev] when given.
Tensor attention_decode_impl(const char* op, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                             int64_t valid_len, std::optional<double> scale, const Tensor* out) {
  check_defined(q, op, "q");
  check_defined(k_cache, op, "k_cache");
  check_defined(v_cache, op, "v_cache");
  check_qkv_dtypes(q, k_cache, v_cache, op);
  KILN_CHECK(q.dim() == 3 && k_cache.dim() == 4 && v_cache.dim() == 4, op,
             "expected q [B, Hq, E], k_cache [B, Hkv, S_max, E] and v_cache [B, Hkv, S_max, Ev], got q {}, k_cache "
             "{} and v_cache {}",
             q.shape_str(), k_cache.shape_str(), v_cache.shape_str());
  const int64_t B = q.size(0), Hq = q.size(1), E = q.size(2);
  const int64_t Hkv = k_cache.size(1), S_max = k_cache.size(2);
  KILN_CHECK(k_cache.size(0) == B && v_cache.size(0) == B && v_cache.size(1) == Hkv && v_cache.size(2) == S_max &&
                 k_cache.size(3) == E,
             op,
             "k_cache must be [B={}, Hkv, S_max, E={}] and v_cache [B, Hkv, S_max, Ev] with the same Hkv and S_max, "
             "got k_cache {} and v_cache {}",
             B, E, k_cache.shape_str(), v_cache.shape_str());
  KILN_CHECK(Hkv >= 1 && Hq % Hkv == 0, op, "the number of query heads ({}) must be a multiple of the KV heads ({})",
             Hq, Hkv);
  KILN_CHECK_KIND(valid_len >= 0 && valid_len <= S_max, Index, op, "valid_len {} is out of range [0, {}]", valid_len,
                  S_max);
  const Tensor k = k_cache.narrow(2, 0, valid_len);
  const Tensor v = v_cache.narrow(2, 0, valid_len);
  if (out == nullptr) {
    const Tensor result =
        sdpa_impl(q.unsqueeze(2), k, v, std::nullopt, 0.0, false, scale, /*enable_gqa=*/true, nullptr);
    return result.view({B, Hq, v_cache.size(3)});
  }
  out_detail::check_out(op, *out, Shape{B, Hq, v_cache.size(3)}, q.dtype(), q.device(), {&q, &k_cache, &v_cache});
  const Tensor into = out->unsqueeze(2);  // [B, Hq, 1, Ev], SDPA's result shape
  sdpa_impl(q.unsqueeze(2), k, v, std::nullopt, 0.0, false, scale, /*enable_gqa=*/true, &into);
  return *out;
}

}  // namespace

Tensor attention_decode(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t valid_len,
                        std::optional<double> scale) {
  KILN_AUTOGRAD(attention_decode, q, k_cache, v_cache, valid_len, scale);
  return attention_decode_impl("attention_decode", q, k_cache, v_cache, valid_len, scale, nullptr);
}

void attention_decode_out(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          int64_t valid_len, std::optional<double> scale) {
  attention_decode_impl("attention_decode_out", q, k_cache, v_cache, valid_len, scale, &out);
}

}  // namespace kiln
