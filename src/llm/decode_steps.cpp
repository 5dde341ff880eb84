#include "llm/decode_steps.h"

#include <utility>

#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/out_variants.h"

namespace kiln::llm {

Tensor DecodeBuffers::get(const std::string& purpose, const Shape& shape, DType dtype) {
  auto key = std::make_tuple(purpose, dtype, shape);
  auto it = buffers_.find(key);
  if (it != buffers_.end()) return it->second;
  // Tensor::empty checks the element and byte counts (checked arithmetic) and says which
  // buffer could not be had.
  Tensor t = Tensor::empty(shape, dtype, device_, "decode buffers");
  buffers_.emplace(std::move(key), t);
  return t;
}

NormStep NormStep::make(const Tensor& weight, bool one_plus, double eps) {
  NormStep n;
  // rms_norm_one_plus's scale, `1.0 + w` in float32, formed once instead of per token.
  n.weight = one_plus ? add(weight.to(DType::Float32), Scalar(1.0)) : weight;
  n.one_plus = one_plus;
  n.eps = eps;
  return n;
}

void NormStep::operator()(const Tensor& out, const Tensor& x) const {
  if (one_plus) {
    rms_norm_out(out, x, weight, eps);  // = rms_norm_one_plus(x, w, eps)
  } else {
    rms_norm_llama_out(out, x, weight, eps);
  }
}

LinearStep LinearStep::make(const Linear& linear, DType incoming, DecodeBuffers& buffers, const std::string& purpose) {
  LinearStep s;
  s.linear = &linear;
  const bool fp8 = linear.format.scales != LinearFormat::Scales::None;
  // Weight-only FP8 takes the activations as they come; the others round them to the
  // weight's dtype first (Linear::operator()).
  const DType input = fp8 ? incoming : linear.format.dtype;
  const int64_t N = linear.weight.size(0), K = linear.weight.size(1);
  if (input != incoming) s.in = buffers.get(purpose + ".in", {1, K}, input);
  s.out = buffers.get(purpose + ".out", {1, N}, input);
  return s;
}

Tensor& LinearStep::operator()(const Tensor& x) {
  const Tensor* input = &x;
  if (in.defined()) {
    in.copy_(x);  // what x.to(weight dtype) computes, into the buffer
    input = &in;
  }
  if (linear->format.scales != LinearFormat::Scales::None) {
    linear_fp8_out(out, *input, linear->weight, *linear->scale);
  } else {
    linear_out(out, *input, linear->weight);
  }
  return out;
}

AttentionExitStep AttentionExitStep::make(const AttentionBlock& block, DType cache_dtype, DecodeBuffers& buffers) {
  AttentionExitStep s;
  s.block = &block;
  const int64_t heads = block.num_heads, hd = block.head_dim;
  const int64_t width = checked_mul(heads, hd, "decode buffers");
  s.attn = buffers.get("attention", {1, heads, hd}, cache_dtype);
  s.attn_flat = s.attn.view({1, width});
  DType o_in = cache_dtype;
  if (block.output_gate) {
    s.gated = buffers.get("attention.gated", {1, heads, hd}, DType::Float32);
    s.gated_flat = s.gated.view({1, width});
    s.gate_sigmoid = buffers.get("attention.gate", {1, heads, hd}, DType::Float32);
    o_in = DType::Float32;
  }
  s.o_proj = LinearStep::make(block.o_proj, o_in, buffers, "o_proj");
  return s;
}

void AttentionExitStep::operator()(Tensor& x, const Tensor& q, const Tensor& gate, const KvCache& cache,
                                   int64_t layer, int64_t pos) {
  // AttentionBlock::attend for one token: attention_decode, then
  // mul(out.to(float32), sigmoid(gate)) with the output gate, o_proj, and the residual.
  attention_decode_out(attn, q, cache.keys(layer), cache.values(layer), pos + 1);
  const Tensor* o = &attn_flat;
  if (block->output_gate) {
    gated.copy_(attn);
    sigmoid_out(gate_sigmoid, gate);
    mul_(gated, gate_sigmoid);
    o = &gated_flat;
  }
  add_(x, o_proj(*o));
}

std::optional<DenseFfnStep> DenseFfnStep::make(const DenseFfn& ffn, NormStep norm, int64_t hidden,
                                               DecodeBuffers& buffers) {
  DenseFfnStep s;
  s.norm = std::move(norm);
  s.h = buffers.get("norm", {1, hidden}, DType::Float32);
  // DenseFfn::forward rounds h once to gate's input dtype and feeds that to gate and up.
  const DType in = ffn.gate.input_dtype();
  if (in != DType::Float32) s.in = buffers.get("ffn.in", {1, hidden}, in);
  s.gate = LinearStep::make(ffn.gate, in, buffers, "ffn.gate");
  s.up = LinearStep::make(ffn.up, in, buffers, "ffn.up");
  if (s.gate.out.dtype() != s.up.out.dtype()) return std::nullopt;
  s.down = LinearStep::make(ffn.down, s.gate.out.dtype(), buffers, "ffn.down");
  return s;
}

void DenseFfnStep::operator()(Tensor& x) {
  // DenseFfn::forward: down(mul(silu(gate(h)), up(h))).
  norm(h, x);
  const Tensor* input = &h;
  if (in.defined()) {
    in.copy_(h);
    input = &in;
  }
  Tensor& g = gate(*input);
  up(*input);
  silu_out(g, g);
  mul_(g, up.out);
  add_(x, down(g));
}

ShortConvStep ShortConvStep::make(const ShortConvBlock& block, NormStep norm, DecodeBuffers& buffers) {
  ShortConvStep s;
  const int64_t H = block.hidden, L = block.kernel.size(0);
  s.norm = std::move(norm);
  s.h = buffers.get("norm", {1, H}, DType::Float32);
  s.in_proj = LinearStep::make(block.in_proj, DType::Float32, buffers, "conv.in_proj");
  s.bcx = s.in_proj.out.dtype() == DType::Float32
              ? s.in_proj.out
              : buffers.get("conv.bcx", {1, checked_mul(int64_t{3}, H, "decode buffers")}, DType::Float32);
  s.b = s.bcx.narrow(1, 0, H);
  s.c = s.bcx.narrow(1, H, H);
  s.xs = s.bcx.narrow(1, 2 * H, H);
  s.history = buffers.get("conv.history", {L, H}, DType::Float32);
  for (int64_t j = 0; j < L; ++j) {
    s.history_rows.push_back(s.history.narrow(0, j, 1));
    s.taps.push_back(block.kernel.select(0, j));
  }
  if (L > 1) {
    s.history_head = s.history.narrow(0, 0, L - 1);
    s.history_tail = s.history.narrow(0, 1, L - 1);
  }
  s.conv = buffers.get("conv.out", {1, H}, DType::Float32);
  s.product = buffers.get("conv.product", {1, H}, DType::Float32);
  s.out_proj = LinearStep::make(block.out_proj, DType::Float32, buffers, "conv.out_proj");
  return s;
}

void ShortConvStep::operator()(Tensor& x, KvCache& cache, int64_t layer) {
  // ShortConvBlock::forward for one token: history = [state, u = B * x], the taps one at
  // a time (mul, then add_), the state shifted by one row, out_proj(C * conv).
  norm(h, x);
  const Tensor& raw = in_proj(h);
  if (!bcx.is_same(raw)) bcx.copy_(raw);
  Tensor& state = cache.conv_state(layer);
  const size_t L = taps.size();
  Tensor& u = history_rows[L - 1];
  if (L > 1) history_head.copy_(state);
  u.copy_(b);
  mul_(u, xs);
  conv.copy_(history_rows[0]);
  mul_(conv, taps[0]);
  for (size_t j = 1; j < L; ++j) {
    product.copy_(history_rows[j]);
    mul_(product, taps[j]);
    add_(conv, product);
  }
  if (L > 1) state.copy_(history_tail);
  mul_(conv, c);  // C * conv: a product of two float32 values, whichever side it is written
  add_(x, out_proj(conv));
}

namespace {

// `t` as float32: itself, or a buffer of its shape that the step fills with t.to(float32).
Tensor float32_of(const Tensor& t, DecodeBuffers& buffers, const std::string& purpose) {
  return t.dtype() == DType::Float32 ? t : buffers.get(purpose, t.sizes(), DType::Float32);
}

void widen(Tensor& dst, const Tensor& src) {
  if (!dst.is_same(src)) dst.copy_(src);
}

}  // namespace

DeltaNetStep DeltaNetStep::make(const DeltaNetBlock& block, NormStep norm, int64_t hidden, DecodeBuffers& buffers) {
  DeltaNetStep s;
  const DeltaNetGeometry& g = block.geometry;
  const int64_t vd = g.value_dim(), channels = g.conv_channels(), hv = g.num_value_heads;
  s.block = &block;
  s.norm = std::move(norm);
  s.h = buffers.get("norm", {1, hidden}, DType::Float32);
  const DType in = block.in_proj_qkv.input_dtype();  // every projection reads h rounded to it
  if (in != DType::Float32) s.in = buffers.get("delta.in", {1, hidden}, in);
  s.qkv_proj = LinearStep::make(block.in_proj_qkv, in, buffers, "delta.qkv");
  s.b_proj = LinearStep::make(block.in_proj_b, in, buffers, "delta.b");
  if (block.grouped_by_key_head) {
    s.qkvz = buffers.get("delta.qkvz", s.qkv_proj.out.sizes(), s.qkv_proj.out.dtype());
    s.ba = buffers.get("delta.ba", s.b_proj.out.sizes(), s.b_proj.out.dtype());
    s.qkv = s.qkvz.narrow(1, 0, channels);
    s.z = s.qkvz.narrow(1, channels, vd);
    s.b = s.ba.narrow(1, 0, hv);
    s.a = s.ba.narrow(1, hv, hv);
  } else {
    s.z_proj = LinearStep::make(block.in_proj_z, in, buffers, "delta.z");
    s.a_proj = LinearStep::make(block.in_proj_a, in, buffers, "delta.a");
    s.qkv = s.qkv_proj.out;
    s.z = s.z_proj.out;
    s.b = s.b_proj.out;
    s.a = s.a_proj.out;
  }
  s.qkv32 = float32_of(s.qkv, buffers, "delta.qkv32");
  s.z32 = float32_of(s.z, buffers, "delta.z32");
  s.b32 = float32_of(s.b, buffers, "delta.b32");
  s.a32 = float32_of(s.a, buffers, "delta.a32");
  s.z_heads = s.z32.reshape({1, hv, g.value_head_dim});
  s.weights = DeltaNetDecodeWeights{block.conv_weight, block.A_log, block.dt_bias, block.norm_weight, block.norm_eps,
                                    g.num_key_heads};
  s.normed = buffers.get("delta.normed", {1, hv, g.value_head_dim}, DType::Float32);
  s.normed_flat = s.normed.view({1, vd});
  s.out_proj = LinearStep::make(block.out_proj, DType::Float32, buffers, "delta.out_proj");
  return s;
}

void DeltaNetStep::operator()(Tensor& x, KvCache& cache, int64_t layer) {
  // DeltaNetBlock::forward for one token: the projections (Qwen3-Next's reordered into
  // the flat order), the conv over [q | k | v], the gates, the recurrent rule, the gated
  // norm and out_proj.
  norm(h, x);
  const Tensor* input = &h;
  if (in.defined()) {
    in.copy_(h);
    input = &in;
  }
  if (block->grouped_by_key_head) {
    const DeltaNetGeometry& g = block->geometry;
    const int64_t hk = g.num_key_heads, r = g.num_value_heads / hk;
    ungroup_by_key_head(qkv_proj(*input), hk, {g.key_head_dim, g.key_head_dim, r * g.value_head_dim, r * g.value_head_dim},
                        qkvz);
    ungroup_by_key_head(b_proj(*input), hk, {r, r}, ba);
  } else {
    qkv_proj(*input);
    z_proj(*input);
    b_proj(*input);
    a_proj(*input);
  }
  widen(qkv32, qkv);
  widen(a32, a);
  widen(b32, b);
  widen(z32, z);
  // causal_conv1d, gated_delta_gates, gated_delta_rule and rms_norm_gated in one call.
  delta_net_decode_out(normed, qkv32, z_heads, a32, b32, weights, cache.delta_conv_state(layer),
                       cache.delta_recurrent_state(layer));
  add_(x, out_proj(normed_flat));
}

DecodeFrame::DecodeFrame(const Tensor& embedding, NormStep final_norm, const Linear& lm_head, DecodeBuffers& buffers)
    : embedding_(embedding), final_norm_(std::move(final_norm)) {
  const int64_t H = embedding.size(1), V = lm_head.weight.size(0);
  x_ = buffers.get("residual", {1, H}, DType::Float32);
  other_ = buffers.get("residual.other", {1, H}, DType::Float32);
  normed_ = buffers.get("final_norm", {1, H}, DType::Float32);
  for (int i = 0; i < 2; ++i) {
    Slot& slot = slots_[i];
    slot.head = LinearStep::make(lm_head, DType::Float32, buffers, "lm_head" + std::to_string(i));
    slot.logits = slot.head.out.dtype() == DType::Float32 ? slot.head.out
                                                          : buffers.get("logits" + std::to_string(i), {1, V},
                                                                        DType::Float32);
    KILN_CHECK(slot.logits.storage().use_count() == 1, "decode buffers", "the logits buffers must not be shared");
  }
}

Tensor& DecodeFrame::embed(int64_t token) {
  // embedding(table, ids).to(float32) for one id: the row widened into the residual.
  x_.copy_(embedding_.narrow(0, token, 1));
  return x_;
}

bool DecodeFrame::Slot::free() const {
  // Every handle this frame keeps is a copy of one tensor, and callers get views of their
  // own (logits() below): the storage has one owner exactly when no caller holds them.
  return logits.storage().use_count() == 1;
}

Tensor DecodeFrame::logits(const Tensor& x) {
  final_norm_(normed_, x);
  for (Slot& slot : slots_) {
    if (!slot.free()) continue;
    const Tensor& y = slot.head(normed_);
    if (!y.is_same(slot.logits)) slot.logits.copy_(y);
    return slot.logits.view(slot.logits.sizes());  // the caller's own view: see Slot::free
  }
  // The caller still holds both buffers' logits: a fresh tensor, as the unfused path.
  const Tensor y = (*slots_[0].head.linear)(normed_);
  return y.to(DType::Float32);
}

}  // namespace kiln::llm
