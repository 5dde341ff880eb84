// Model::forward of both families against a plain double-precision reference written
// here from the spec's math (models.md §0-§3, §5), reading the synthetic checkpoint's
// tensors itself; prefill / decode consistency; FP8 (quantised at load and HF block
// scaled).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/llm.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm_model_test_util.h"
#include "llm_reference_math.h"

namespace kiln::llm {
namespace {

using kiln::testing::relative_max_difference;
using kiln::testing::relative_rms_difference;
using kiln::testing::tiny_model_dir;
using namespace kiln::testing;  // Vec and the reference math

// ---------------------------------------------------------------- the reference

class ReferenceModel {
 public:
  explicit ReferenceModel(const std::string& dir)
      : c_(load_model_config(dir)), ckpt_(Checkpoint::open(dir)), lfm2_(c_.arch == Arch::Lfm2Moe) {}

  // Logits [T][vocab] of tokens at positions 0 .. T-1.
  std::vector<Vec> forward(const std::vector<int32_t>& tokens) {
    const int64_t T = static_cast<int64_t>(tokens.size()), H = c_.hidden_size;
    const Vec embed = weight("model.embed_tokens.weight");
    std::vector<Vec> x(T);
    for (int64_t t = 0; t < T; ++t) x[t] = Vec(embed.begin() + tokens[t] * H, embed.begin() + (tokens[t] + 1) * H);
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      std::vector<Vec> h = norm_rows(x, weight(p + (lfm2_ ? "operator_norm.weight" : "input_layernorm.weight")));
      std::vector<Vec> m = c_.mixers[i] == MixerKind::Attention ? attention(h, p + "self_attn.") : short_conv(h, p);
      add_rows(x, m);
      h = norm_rows(x, weight(p + (lfm2_ ? "ffn_norm.weight" : "post_attention_layernorm.weight")));
      const std::string f = p + (lfm2_ ? "feed_forward." : "mlp.");
      std::vector<Vec> y(T);
      for (int64_t t = 0; t < T; ++t) y[t] = c_.moe_layers[i] ? moe(h[t], f) : swiglu(h[t], f, "");
      add_rows(x, y);
    }
    std::vector<Vec> h = norm_rows(x, weight(lfm2_ ? "model.embedding_norm.weight" : "model.norm.weight"));
    const std::string head = c_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    std::vector<Vec> logits(T);
    for (int64_t t = 0; t < T; ++t) logits[t] = matvec(head, h[t]);
    return logits;
  }

 private:
  Vec weight(const std::string& name) { return checkpoint_weight(ckpt_, name); }
  Vec matvec(const std::string& name, const Vec& x) { return kiln::testing::matvec(weight(name), x); }
  Vec rms_norm(const Vec& x, const Vec& w, size_t begin = 0) const {
    return kiln::testing::rms_norm(x, w, c_.norm_eps, 0.0, begin);
  }
  std::vector<Vec> norm_rows(const std::vector<Vec>& x, const Vec& w) const {
    return kiln::testing::norm_rows(x, w, c_.norm_eps, 0.0);
  }
  void rope(Vec& head, int64_t pos) const { kiln::testing::rope(head, pos, c_.head_dim, c_.rope_theta); }

  // GQA causal attention with per-head q/k norms (§0.3, §1.2 steps 2-6, §3.2).
  std::vector<Vec> attention(const std::vector<Vec>& h, const std::string& p) {
    const int64_t T = static_cast<int64_t>(h.size()), E = c_.head_dim, Hq = c_.num_heads, Hk = c_.num_kv_heads;
    const Vec qn = weight(p + (lfm2_ ? "q_layernorm.weight" : "q_norm.weight"));
    const Vec kn = weight(p + (lfm2_ ? "k_layernorm.weight" : "k_norm.weight"));
    std::vector<std::vector<Vec>> q(T), k(T), v(T);  // [t][head][E]
    for (int64_t t = 0; t < T; ++t) {
      const Vec qa = matvec(p + "q_proj.weight", h[t]);
      const Vec ka = matvec(p + "k_proj.weight", h[t]);
      const Vec va = matvec(p + "v_proj.weight", h[t]);
      for (int64_t hh = 0; hh < Hq; ++hh) {
        q[t].push_back(rms_norm(qa, qn, hh * E));
        rope(q[t].back(), t);
      }
      for (int64_t hh = 0; hh < Hk; ++hh) {
        k[t].push_back(rms_norm(ka, kn, hh * E));
        rope(k[t].back(), t);
        v[t].emplace_back(va.begin() + hh * E, va.begin() + (hh + 1) * E);
      }
    }
    std::vector<Vec> out = causal_attention(q, k, v);
    for (Vec& row : out) row = matvec(p + (lfm2_ ? "out_proj.weight" : "o_proj.weight"), row);
    return out;
  }

  // LFM2 short conv (§3.2) with zero history.
  std::vector<Vec> short_conv(const std::vector<Vec>& h, const std::string& p) {
    const int64_t T = static_cast<int64_t>(h.size()), H = c_.hidden_size, L = c_.conv_kernel;
    const Vec w = weight(p + "conv.conv.weight");  // [H, 1, L]
    std::vector<Vec> b(T), cgate(T), u(T);
    for (int64_t t = 0; t < T; ++t) {
      const Vec bcx = matvec(p + "conv.in_proj.weight", h[t]);
      b[t] = Vec(bcx.begin(), bcx.begin() + H);
      cgate[t] = Vec(bcx.begin() + H, bcx.begin() + 2 * H);
      u[t] = Vec(H);
      for (int64_t i = 0; i < H; ++i) u[t][i] = bcx[i] * bcx[2 * H + i];
    }
    std::vector<Vec> out(T);
    for (int64_t t = 0; t < T; ++t) {
      Vec y(H, 0.0);
      for (int64_t ch = 0; ch < H; ++ch) {
        double conv = 0.0;
        for (int64_t j = 0; j < L; ++j) {
          const int64_t src = t - (L - 1) + j;
          if (src >= 0) conv += w[ch * L + j] * u[src][ch];
        }
        y[ch] = cgate[t][ch] * conv;
      }
      out[t] = matvec(p + "conv.out_proj.weight", y);
    }
    return out;
  }

  // down(silu(gate x) * up x) with Qwen (gate_proj/up_proj/down_proj) or LFM2 (w1/w3/w2) names.
  Vec swiglu(const Vec& x, const std::string& f, const std::string& expert) {
    const std::string base = f + expert;
    const Vec g = matvec(base + (lfm2_ ? "w1.weight" : "gate_proj.weight"), x);
    const Vec u = matvec(base + (lfm2_ ? "w3.weight" : "up_proj.weight"), x);
    Vec a(g.size());
    for (size_t i = 0; i < g.size(); ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return matvec(base + (lfm2_ ? "w2.weight" : "down_proj.weight"), a);
  }

  // Router (§1.2 step 7, §3.2 steps 1-6): softmax (Qwen) or sigmoid + expert_bias for
  // the choice only (LFM2), top-k with ties to the lower id, renormalise, scale.
  Vec moe(const Vec& x, const std::string& f) {
    const Vec logits = matvec(f + "gate.weight", x);
    const int64_t E = static_cast<int64_t>(logits.size());
    Vec score(E), select(E);
    if (lfm2_) {
      for (int64_t e = 0; e < E; ++e) score[e] = 1.0 / (1.0 + std::exp(-logits[e]));
    } else {
      const double top = *std::max_element(logits.begin(), logits.end());
      double total = 0.0;
      for (int64_t e = 0; e < E; ++e) total += score[e] = std::exp(logits[e] - top);
      for (double& s : score) s /= total;
    }
    const Vec bias = lfm2_ && c_.use_expert_bias ? weight(f + "expert_bias") : Vec(E, 0.0);
    for (int64_t e = 0; e < E; ++e) select[e] = score[e] + bias[e];
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return select[a] > select[b]; });
    order.resize(c_.num_experts_per_tok);
    double sum = 0.0;
    for (int64_t e : order) sum += score[e];
    Vec y(x.size(), 0.0);
    for (int64_t e : order) {
      double w = score[e];
      if (c_.norm_topk_prob) w /= sum + (lfm2_ ? 1e-6 : 0.0);
      w *= lfm2_ ? c_.routed_scaling_factor : 1.0;
      const Vec out = swiglu(x, f, "experts." + std::to_string(e) + ".");
      for (size_t i = 0; i < y.size(); ++i) y[i] += w * out[i];
    }
    return y;
  }

  ModelConfig c_;
  Checkpoint ckpt_;
  bool lfm2_;
};

class LlmModel : public ::testing::TestWithParam<std::string> {};

// Tolerances.
// float32 everywhere (weights are the stored bf16 values, exactly representable): each
// dot product of length K <= 128 errs by at most K u with u = 2^-24, and a logit sits
// behind about 25 dependent steps (norms, projections, attention, routing, experts, per
// layer, for 3-4 layers), so |diff| <= 128 * 25 * 2^-24 ~ 2e-4 of the logit scale
// (max(1, max |logit|)).
constexpr double kFloat32Bound = 2e-4;
// bfloat16 activations into every bfloat16 linear and a bfloat16 KV cache: each
// rounding errs by u = 2^-9 relative, RMS u / sqrt(3); about 21 roundings lie on a
// logit's path (5 per layer, lm_head's input), adding in quadrature:
// sqrt(21) * 2^-9 / sqrt(3) ~ 0.005 RMS; bound 4x that.
constexpr double kBFloat16RmsBound = 0.02;

TEST_P(LlmModel, Float32ForwardMatchesReference) {
  const std::string& dir = tiny_model_dir(GetParam());
  auto model = Model::load(dir, float32_options());
  Tensor logits = model->forward(kPrompt, /*all_logits=*/true);
  ASSERT_EQ(logits.sizes(), (Shape{static_cast<int64_t>(kPrompt.size()), model->info().vocab_size}));
  Tensor expected = to_tensor(ReferenceModel(dir).forward(kPrompt));
  EXPECT_LT(relative_max_difference(logits, expected), kFloat32Bound);
  // The last-row form returns exactly the last row.
  model->reset();
  Tensor last = model->forward(kPrompt);
  EXPECT_LT(relative_max_difference(last, expected.narrow(0, kPrompt.size() - 1, 1)), kFloat32Bound);
}

TEST_P(LlmModel, BFloat16ForwardMatchesReference) {
  const std::string& dir = tiny_model_dir(GetParam());
  auto model = Model::load(dir);
  EXPECT_EQ(model->info().cache_dtype, DType::BFloat16);
  EXPECT_EQ(model->info().weight_dtypes, "bfloat16");
  Tensor logits = model->forward(kPrompt, true);
  Tensor expected = to_tensor(ReferenceModel(dir).forward(kPrompt));
  EXPECT_LT(relative_rms_difference(logits, expected), kBFloat16RmsBound);
}

// Prefill of N tokens == prefill N-1 then decode 1 == token-by-token decode.
TEST_P(LlmModel, PrefillAndDecodeAgree) {
  const std::string& dir = tiny_model_dir(GetParam());
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "as stored (bfloat16)" : "float32");
    auto model = Model::load(dir, bf16 ? LoadOptions{} : float32_options());
    const int64_t n = static_cast<int64_t>(kPrompt.size());
    Tensor all = model->forward(kPrompt, true);
    EXPECT_EQ(model->position(), n);

    model->reset();
    std::span<const int32_t> prompt(kPrompt);
    model->forward(prompt.first(n - 1));
    Tensor last = model->forward(prompt.subspan(n - 1));
    // Split prefill at an odd point too: the second block continues at position 4.
    model->reset();
    model->forward(prompt.first(4));
    Tensor split = model->forward(prompt.subspan(4), true);

    model->reset();
    std::vector<Tensor> steps;
    for (int64_t t = 0; t < n; ++t) steps.push_back(model->forward(prompt.subspan(t, 1)));
    // bfloat16: GEMM and GEMV sum in different orders (float32 differences ~1e-7) and a
    // bf16 rounding can flip by one ulp (2^-8) on the rare value near a tie; keep the
    // float32 bound for float32 and a 1% RMS bound for bfloat16.
    auto check = [&](const Tensor& got, const Tensor& want) {
      if (bf16) {
        EXPECT_LT(relative_rms_difference(got, want), 0.01);
      } else {
        EXPECT_LT(relative_max_difference(got, want), kFloat32Bound);
      }
    };
    check(last, all.narrow(0, n - 1, 1));
    check(split, all.narrow(0, 4, n - 4));
    for (int64_t t = 0; t < n; ++t) check(steps[t], all.narrow(0, t, 1));
  }
}

// FP8 quantised at load (row scales) vs the same checkpoint in float32. Each weight's
// e4m3 rounding errs by at most 2^-4 relative (3 mantissa bits), RMS about 2^-4/sqrt(3)
// = 0.036, and a linear's output inherits that relative RMS; about 13 quantised
// linears lie in series on a logit's path (2 per mixer, 2 per FFN, lm_head), adding in
// quadrature: sqrt(13) * 0.036 = 0.13; bound 0.25.
TEST_P(LlmModel, Fp8QuantisedAtLoadStaysClose) {
  const std::string& dir = tiny_model_dir(GetParam());
  LoadOptions fp8;
  fp8.weights = WeightFormat::Fp8;
  fp8.cache_dtype = DType::Float32;
  auto quantised = Model::load(dir, fp8);
  auto exact = Model::load(dir, float32_options());
  // Routers stay bf16 (dense Qwen3 has none).
  const bool has_router = load_model_config(dir).num_experts > 0;
  EXPECT_EQ(quantised->info().weight_dtypes,
            has_router ? "bfloat16 + float8_e4m3fn (row scales)" : "float8_e4m3fn (row scales)");
  EXPECT_LT(relative_rms_difference(quantised->forward(kPrompt, true), exact->forward(kPrompt, true)), 0.25);

  // The report covers every projection matrix, each expert matrix and lm_head; its
  // relative errors lie within e4m3's 2^-4 bound and are not zero.
  const ModelConfig c = load_model_config(dir);
  int64_t matrices = 1;  // lm_head
  for (int64_t i = 0; i < c.num_layers; ++i) {
    matrices += c.mixers[i] == MixerKind::Attention ? 4 : 2;
    matrices += c.moe_layers[i] ? 3 * c.num_experts : 3;
  }
  ASSERT_TRUE(quantised->info().fp8_quantization.has_value());
  const Fp8QuantizationReport& r = *quantised->info().fp8_quantization;
  EXPECT_EQ(r.tensors, matrices);
  EXPECT_GT(r.rms_relative_error, 1.0 / 256);
  EXPECT_LE(r.rms_relative_error, r.max_relative_error);
  EXPECT_LE(r.max_relative_error, 1.0 / 16);
  // FP8 weights are a quarter of the float32 ones (plus scales and the float32 norms).
  EXPECT_LT(quantised->info().resident_weight_bytes, exact->info().resident_weight_bytes / 2);
  EXPECT_EQ(quantised->info().parameter_count, exact->info().parameter_count);
  EXPECT_FALSE(exact->info().fp8_quantization.has_value());
}

// A Hugging Face FP8 checkpoint (e4m3 weights + 128x128 `weight_scale_inv`):
// dequantised at load it matches the reference on the dequantised weights to float32
// precision; run as stored, the block-scaled weights take float32 activations and only
// the bf16 router and lm_head see bf16-rounded inputs: two roundings of 2^-9 on a
// logit's path, sqrt(2) * 2^-9 / sqrt(3) = 0.0016 RMS, bound 0.01. It also stays within
// the e4m3 bound (see above) of the bf16 checkpoint made from the same random values.
TEST_P(LlmModel, HuggingFaceFp8Checkpoint) {
  const std::string& dir = tiny_model_dir(GetParam(), /*fp8=*/true);
  const Tensor expected = to_tensor(ReferenceModel(dir).forward(kPrompt));
  auto dequantised = Model::load(dir, float32_options());
  EXPECT_EQ(dequantised->info().weight_dtypes, "float32");
  EXPECT_LT(relative_max_difference(dequantised->forward(kPrompt, true), expected), kFloat32Bound);

  LoadOptions stored;
  stored.cache_dtype = DType::Float32;
  auto model = Model::load(dir, stored);
  EXPECT_EQ(model->info().weight_dtypes, "bfloat16 + float8_e4m3fn (128x128 block scales)");
  Tensor logits = model->forward(kPrompt, true);
  EXPECT_LT(relative_rms_difference(logits, expected), 0.01);

  // WeightFormat::Fp8 keeps the block scales and quantises only what is still bf16
  // (lm_head; routers stay bf16).
  LoadOptions fp8;
  fp8.weights = WeightFormat::Fp8;
  auto requantised = Model::load(dir, fp8);
  ASSERT_TRUE(requantised->info().fp8_quantization.has_value());
  EXPECT_EQ(requantised->info().fp8_quantization->tensors, 1);

  auto bf16 = Model::load(tiny_model_dir(GetParam()), float32_options());
  EXPECT_LT(relative_rms_difference(logits, bf16->forward(kPrompt, true)), 0.25);
}

TEST_P(LlmModel, InfoDescribesTheModel) {
  const std::string& dir = tiny_model_dir(GetParam());
  int64_t calls = 0, last_done = -1, last_total = -1;
  LoadOptions o;
  o.progress = [&](std::string_view stage, int64_t done, int64_t total) {
    EXPECT_EQ(stage, "weights");
    EXPECT_LE(done, total);
    ++calls;
    last_done = done;
    last_total = total;
  };
  auto model = Model::load(dir, o);
  const ModelInfo& info = model->info();
  const ModelConfig c = load_model_config(dir);
  EXPECT_EQ(info.model_type, GetParam());
  EXPECT_EQ(info.num_layers, c.num_layers);
  EXPECT_EQ(info.hidden_size, c.hidden_size);
  EXPECT_EQ(info.vocab_size, c.vocab_size);
  EXPECT_EQ(info.num_experts, c.num_experts);
  EXPECT_EQ(info.max_context, std::min<int64_t>(c.max_position_embeddings, 4096));
  EXPECT_GT(calls, 0);
  EXPECT_EQ(last_done, last_total);

  // Parameters: every stored element once (tied embeddings once).
  Checkpoint ckpt = Checkpoint::open(dir);
  int64_t params = 0, bytes = 0;
  for (const std::string& name : ckpt.names()) {
    params += shape_numel(ckpt.entry(name).shape);
    bytes += static_cast<int64_t>(ckpt.entry(name).end - ckpt.entry(name).begin);
  }
  EXPECT_EQ(info.parameter_count, params);
  EXPECT_GT(info.resident_weight_bytes, bytes / 2);

  // Decode reads: grows by the K/V of one token per position.
  const int64_t kv_per_token = 2 * info.num_attention_layers * c.num_kv_heads * c.head_dim * 2;  // bf16 cache
  const int64_t at0 = model->decode_bytes_per_token();
  model->forward(kPrompt);
  EXPECT_EQ(model->decode_bytes_per_token() - at0, static_cast<int64_t>(kPrompt.size()) * kv_per_token);
  EXPECT_LT(at0, info.resident_weight_bytes);  // only top_k of the experts
}

INSTANTIATE_TEST_SUITE_P(Families, LlmModel, ::testing::Values("qwen3_moe", "lfm2_moe", "qwen3"));

}  // namespace
}  // namespace kiln::llm
