// Qwen3-MoE (`qwen3_moe`, Qwen3MoeForCausalLM): every layer attention + (MoE or dense
// SwiGLU), Qwen tensor names (spec: models.md §1.2, §1.3).
#include "kiln/error.h"
#include "llm/decoder.h"

namespace kiln::llm {

DecoderWeights load_qwen3_moe(const ModelConfig& c, WeightLoader& loader) {
  check_layer_plan(c);
  check_layers_present(c, loader);
  const int64_t hidden = c.hidden_size;
  DecoderWeights w;
  w.embedding = loader.embedding("model.embed_tokens.weight", c.vocab_size, hidden);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    KILN_CHECK_KIND(c.mixers[i] == MixerKind::Attention, Value, "load qwen3_moe",
                    "config.json: layer {} is not an attention layer; qwen3_moe has attention only", i);
    const std::string p = "model.layers." + std::to_string(i) + ".";
    DecoderLayer layer;
    layer.mixer_norm = loader.small(p + "input_layernorm.weight", {hidden});
    layer.attention = load_attention_block(c, loader, p + "self_attn.", "o_proj", "q_norm", "k_norm");
    layer.ffn_norm = loader.small(p + "post_attention_layernorm.weight", {hidden});
    if (c.moe_layers[i]) {
      MoeBlock moe;
      moe.router = loader.linear(p + "mlp.gate.weight", c.num_experts, hidden, LinearRole::Router);
      moe.experts = loader.experts({p + "mlp.experts", "gate_proj", "up_proj", "down_proj"}, c.num_experts,
                                   c.moe_intermediate_size, hidden);
      moe.top_k = c.num_experts_per_tok;
      moe.scoring = c.scoring;
      moe.renormalize = c.norm_topk_prob;
      moe.renorm_eps = 0.0;  // Qwen divides by the plain sum (§1.2)
      moe.routed_scaling_factor = 1.0;
      layer.moe = std::move(moe);
    } else {
      layer.dense = load_dense_ffn(c, loader, p + "mlp.", "gate_proj", "up_proj", "down_proj");
    }
    w.layers.push_back(std::move(layer));
  }
  w.final_norm = loader.small("model.norm.weight", {hidden});
  w.lm_head = load_lm_head(c, loader, w.embedding);
  return w;
}

}  // namespace kiln::llm
