// LFM2-MoE (`lfm2_moe`, Lfm2MoeForCausalLM): short-conv and attention layers per
// layer_types, dense SwiGLU in the first num_dense_layers, sigmoid-routed MoE after,
// final norm `model.embedding_norm`, lm_head tied to the embeddings (spec: models.md
// §3.2, §3.3).
#include "kiln/error.h"
#include "llm/decoder.h"

namespace kiln::llm {
namespace {

constexpr const char* kOp = "load lfm2_moe";
constexpr double kLfm2RenormEps = 1e-6;  // w / (sum w + 1e-6), Lfm2MoeSparseMoeBlock

ShortConvBlock load_short_conv(const ModelConfig& c, WeightLoader& loader, const std::string& p) {
  const int64_t hidden = c.hidden_size;
  KILN_CHECK_KIND(!loader.has(p + "conv.conv.bias") && !loader.has(p + "conv.in_proj.bias"), NotImplemented, kOp,
                  "'{}conv' has bias tensors (conv_bias: true), which kiln does not support", p);
  ShortConvBlock conv;
  conv.hidden = hidden;
  conv.in_proj = loader.linear(p + "conv.in_proj.weight", 3 * hidden, hidden, LinearRole::Projection);
  conv.out_proj = loader.linear(p + "conv.out_proj.weight", hidden, hidden, LinearRole::Projection);
  // [H, 1, L] -> [L, H], so each tap is one contiguous row.
  conv.kernel = loader.small(p + "conv.conv.weight", {hidden, 1, c.conv_kernel})
                    .view({hidden, c.conv_kernel})
                    .t()
                    .contiguous();
  return conv;
}

}  // namespace

DecoderWeights load_lfm2_moe(const ModelConfig& c, WeightLoader& loader) {
  check_layer_plan(c);
  check_layers_present(c, loader);
  const int64_t hidden = c.hidden_size;
  DecoderWeights w;
  w.embedding = loader.embedding("model.embed_tokens.weight", c.vocab_size, hidden);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    DecoderLayer layer;
    layer.mixer_norm = loader.small(p + "operator_norm.weight", {hidden});
    if (c.mixers[i] == MixerKind::Attention) {
      layer.attention = load_attention_block(c, loader, p + "self_attn.", "out_proj", "q_layernorm", "k_layernorm");
    } else {
      layer.conv = load_short_conv(c, loader, p);
    }
    layer.ffn_norm = loader.small(p + "ffn_norm.weight", {hidden});
    const std::string f = p + "feed_forward.";
    if (c.moe_layers[i]) {
      MoeBlock moe;
      moe.router = loader.linear(f + "gate.weight", c.num_experts, hidden, LinearRole::Router);
      moe.experts = loader.experts({f + "experts", "w1", "w3", "w2"}, c.num_experts, c.moe_intermediate_size, hidden);
      if (c.use_expert_bias) moe.selection_bias = loader.small(f + "expert_bias", {c.num_experts});
      moe.top_k = c.num_experts_per_tok;
      moe.scoring = c.scoring;
      moe.renormalize = c.norm_topk_prob;
      moe.renorm_eps = kLfm2RenormEps;
      moe.routed_scaling_factor = c.routed_scaling_factor;
      layer.moe = std::move(moe);
    } else {
      layer.dense = load_dense_ffn(c, loader, f, "w1", "w3", "w2");
    }
    w.layers.push_back(std::move(layer));
  }
  w.final_norm = loader.small("model.embedding_norm.weight", {hidden});
  w.lm_head = load_lm_head(c, loader, w.embedding);
  return w;
}

}  // namespace kiln::llm
