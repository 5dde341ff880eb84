// Qwen3-Next (`qwen3_next`, Qwen3NextForCausalLM) and the Qwen3.5/3.6 text tower
// (`qwen3_5_moe`, Qwen3_5MoeForConditionalGeneration): Gated DeltaNet and gated
// attention layers per layer_types, zero-centred norms, sparse MoE with a shared expert
// (spec: models.md §2). Qwen3.5 keeps its text tower under "model.language_model."
// (text-only re-saves under "model."); Checkpoint reads both as "model." and skips the
// vision tower and the MTP head.
#include "kiln/error.h"
#include "llm/decoder.h"

namespace kiln::llm {
namespace {

constexpr const char* kOp = "load model";

DeltaNetBlock load_delta_net(const ModelConfig& c, WeightLoader& loader, const std::string& p) {
  const DeltaNetGeometry& g = c.delta_net;
  const int64_t hidden = c.hidden_size, hv = g.num_value_heads, channels = g.conv_channels();
  DeltaNetBlock d;
  d.geometry = g;
  d.norm_eps = c.norm_eps;
  if (c.arch == Arch::Qwen3Next) {
    d.in_proj_qkv = loader.linear(p + "in_proj_qkvz.weight", channels + g.value_dim(), hidden, LinearRole::Projection);
    d.in_proj_b = loader.linear(p + "in_proj_ba.weight", 2 * hv, hidden, LinearRole::Projection);
    d.grouped_by_key_head = true;
  } else {
    d.in_proj_qkv = loader.linear(p + "in_proj_qkv.weight", channels, hidden, LinearRole::Projection);
    d.in_proj_z = loader.linear(p + "in_proj_z.weight", g.value_dim(), hidden, LinearRole::Projection);
    d.in_proj_b = loader.linear(p + "in_proj_b.weight", hv, hidden, LinearRole::Projection);
    d.in_proj_a = loader.linear(p + "in_proj_a.weight", hv, hidden, LinearRole::Projection);
  }
  KILN_CHECK_KIND(!loader.has(p + "conv1d.bias"), NotImplemented, kOp,
                  "'{}conv1d.bias' is present: kiln's Gated DeltaNet conv has no bias", p);
  d.conv_weight = loader.small(p + "conv1d.weight", {channels, 1, g.conv_kernel}).view({channels, g.conv_kernel});
  d.A_log = loader.small(p + "A_log", {hv});
  d.dt_bias = loader.small(p + "dt_bias", {hv});
  d.norm_weight = loader.small(p + "norm.weight", {g.value_head_dim});
  d.out_proj = loader.linear(p + "out_proj.weight", hidden, g.value_dim(), LinearRole::Projection);
  return d;
}

SwigluWeights swiglu_of(const Linear& gate, const Linear& up, const Linear& down) {
  return {gate.weight, up.weight, down.weight, gate.scale, up.scale, down.scale};
}

MoeBlock load_moe(const ModelConfig& c, WeightLoader& loader, const std::string& f) {
  const int64_t hidden = c.hidden_size, shared = c.shared_expert_intermediate_size;
  MoeBlock moe;
  moe.router = loader.linear(f + "gate.weight", c.num_experts, hidden, LinearRole::Router);
  // Both layouts: per-expert names (Qwen3-Next, FP8 releases) or fused 3-D tensors
  // (Qwen3.5 bf16 on disk).
  moe.experts = loader.experts({f + "experts", "gate_proj", "up_proj", "down_proj"}, c.num_experts,
                               c.moe_intermediate_size, hidden);
  moe.top_k = c.num_experts_per_tok;
  moe.scoring = MoeScoring::Softmax;
  moe.renormalize = c.norm_topk_prob;
  moe.renorm_eps = 0.0;
  const std::string s = f + "shared_expert.";
  const Linear gate = loader.linear(s + "gate_proj.weight", shared, hidden, LinearRole::Projection);
  const Linear up = loader.linear(s + "up_proj.weight", shared, hidden, LinearRole::Projection);
  const Linear down = loader.linear(s + "down_proj.weight", hidden, shared, LinearRole::Projection);
  moe.shared = SharedExpert{swiglu_of(gate, up, down), loader.small(f + "shared_expert_gate.weight", {1, hidden})};
  return moe;
}

}  // namespace

DecoderWeights load_qwen3_hybrid(const ModelConfig& c, WeightLoader& loader) {
  check_layer_plan(c);
  KILN_CHECK_KIND(c.shared_expert_intermediate_size > 0, Value, kOp,
                  "config.json: shared_expert_intermediate_size must be > 0 for {}", c.model_type);
  const std::string m = "model.";
  check_layers_present(c, loader);
  const int64_t hidden = c.hidden_size;
  DecoderWeights w;
  w.embedding = loader.embedding(m + "embed_tokens.weight", c.vocab_size, hidden);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = m + "layers." + std::to_string(i) + ".";
    DecoderLayer layer;
    layer.mixer_norm = loader.small(p + "input_layernorm.weight", {hidden});
    if (c.mixers[i] == MixerKind::Attention) {
      layer.attention = load_attention_block(c, loader, p + "self_attn.", "o_proj", "q_norm", "k_norm");
    } else {
      KILN_CHECK_KIND(c.mixers[i] == MixerKind::GatedDeltaNet, Value, kOp,
                      "config.json: layer {} is neither linear_attention nor full_attention", i);
      layer.delta_net = load_delta_net(c, loader, p + "linear_attn.");
    }
    layer.ffn_norm = loader.small(p + "post_attention_layernorm.weight", {hidden});
    if (c.moe_layers[i]) {
      layer.moe = load_moe(c, loader, p + "mlp.");
    } else {
      layer.dense = load_dense_ffn(c, loader, p + "mlp.", "gate_proj", "up_proj", "down_proj");
    }
    w.layers.push_back(std::move(layer));
  }
  w.final_norm = loader.small(m + "norm.weight", {hidden});
  w.lm_head = load_lm_head(c, loader, w.embedding);
  return w;
}

}  // namespace kiln::llm
