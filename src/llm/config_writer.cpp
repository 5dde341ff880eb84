// ModelConfig -> the config.json transformers writes for Qwen3MoeForCausalLM,
// Lfm2MoeForCausalLM, Qwen3ForCausalLM, Qwen3NextForCausalLM and
// Qwen3_5MoeForConditionalGeneration (keys sorted, as PretrainedConfig.to_json_string does), so that
// synthetic checkpoints look like the real ones to kiln and to transformers alike.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/error.h"
#include "llm/config.h"

namespace kiln::llm {
namespace {

using nlohmann::json;

constexpr const char* kOp = "model_config_to_json";

std::string dtype_string(DType dtype) {
  if (dtype != DType::BFloat16 && dtype != DType::Float16 && dtype != DType::Float32) {
    fail(ErrorKind::Value, kOp, "dtype {} cannot be a checkpoint dtype (bfloat16, float16 or float32)",
         dtype_name(dtype));
  }
  return std::string(dtype_name(dtype));
}

void put_token_ids(json& j, const ModelConfig& c) {
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (c.pad_token_id) j["pad_token_id"] = *c.pad_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  if (c.eos_token_ids.size() > 1) j["eos_token_id"] = c.eos_token_ids;
}

// transformers' FP8 block-scaled layout (spec models.md §5.1): routers and the output
// head stay in the checkpoint dtype, like Qwen's own FP8 releases list them.
json fp8_quantization(const ModelConfig& c) {
  json keep = json::array();
  if (!c.tie_word_embeddings) keep.push_back("lm_head");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    if (c.arch == Arch::Qwen3Moe || c.arch == Arch::Qwen3) {
      keep.push_back(layer + "input_layernorm");
      if (c.moe_layers[i]) keep.push_back(layer + "mlp.gate");
      keep.push_back(layer + "post_attention_layernorm");
    } else if (c.arch == Arch::Qwen3Next || c.arch == Arch::Qwen35Moe) {
      // Qwen's hybrid FP8 releases keep norms, routers, the shared-expert gate and the
      // DeltaNet's conv, gate projections and parameters in bf16 (spec §5.2).
      const std::string l = c.weight_prefix + "layers." + std::to_string(i) + ".";
      keep.push_back(l + "input_layernorm");
      keep.push_back(l + "post_attention_layernorm");
      if (c.mixers[i] == MixerKind::GatedDeltaNet) {
        for (const char* m : {"conv1d", "in_proj_a", "in_proj_b", "in_proj_ba", "norm"}) {
          keep.push_back(l + "linear_attn." + m);
        }
      }
      if (c.moe_layers[i]) {
        keep.push_back(l + "mlp.gate");
        keep.push_back(l + "mlp.shared_expert_gate");
      }
    } else if (c.moe_layers[i]) {
      keep.push_back(layer + "feed_forward.gate");
    }
  }
  return {{"activation_scheme", "dynamic"},
          {"fmt", "e4m3"},
          {"modules_to_not_convert", keep},
          {"quant_method", "fp8"},
          {"weight_block_size", {128, 128}}};
}

bool every_layer_is_attention(const ModelConfig& c) {
  return std::all_of(c.mixers.begin(), c.mixers.end(), [](MixerKind m) { return m == MixerKind::Attention; });
}

// The keys every Qwen config (Qwen3, Qwen3-MoE, Qwen3-Next, Qwen3.5's text_config) writes
// alike. (The objects keep their keys sorted, so where a key is added does not matter.)
json qwen_common_json(const ModelConfig& c) {
  return {
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"head_dim", c.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"initializer_range", 0.02},
      {"max_position_embeddings", c.max_position_embeddings},
      {"num_attention_heads", c.num_heads},
      {"num_hidden_layers", c.num_layers},
      {"num_key_value_heads", c.num_kv_heads},
      {"rms_norm_eps", c.norm_eps},
      {"use_cache", true},
      {"vocab_size", c.vocab_size},
  };
}

// The sparse MoE keys of Qwen3-MoE, Qwen3-Next and Qwen3.5.
void put_qwen_moe_keys(json& j, const ModelConfig& c) {
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["num_experts"] = c.num_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = 0.001;
}

// Qwen3-MoE and Qwen3-Next name their dense layers in mlp_only_layers.
void put_mlp_only_layers(json& j, const ModelConfig& c) {
  json mlp_only = json::array();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!c.moe_layers[i]) mlp_only.push_back(i);
  }
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = mlp_only;
  j["norm_topk_prob"] = c.norm_topk_prob;
}

// Qwen3 and Qwen3-MoE (transformers 4.51's Qwen3Config and Qwen3MoeConfig).
json qwen3_family_json(const ModelConfig& c, const char* architecture, const char* model_type) {
  json j = qwen_common_json(c);
  j["architectures"] = {architecture};
  j["max_window_layers"] = c.num_layers;
  j["model_type"] = model_type;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = c.rope_theta;
  j["sliding_window"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = dtype_string(c.dtype);
  j["transformers_version"] = "4.51.0";
  j["use_sliding_window"] = false;
  return j;
}

json qwen3_moe_json(const ModelConfig& c) {
  if (!every_layer_is_attention(c) || c.scoring != MoeScoring::Softmax || c.use_expert_bias ||
      c.routed_scaling_factor != 1.0) {
    fail(ErrorKind::Value, kOp, "qwen3_moe has attention in every layer, softmax routing, no expert bias and no "
         "routed scaling");
  }
  json j = qwen3_family_json(c, "Qwen3MoeForCausalLM", "qwen3_moe");
  put_qwen_moe_keys(j, c);
  put_mlp_only_layers(j, c);
  if (c.intermediate_size > 0) j["intermediate_size"] = c.intermediate_size;
  return j;
}

json qwen3_json(const ModelConfig& c) {
  if (!every_layer_is_attention(c) || std::find(c.moe_layers.begin(), c.moe_layers.end(), true) != c.moe_layers.end()) {
    fail(ErrorKind::Value, kOp, "qwen3 has attention and a dense SwiGLU in every layer");
  }
  json j = qwen3_family_json(c, "Qwen3ForCausalLM", "qwen3");
  j["intermediate_size"] = c.intermediate_size;
  return j;
}

// The keys Qwen3-Next's config and Qwen3.5's text_config share.
json qwen_hybrid_text_json(const ModelConfig& c) {
  if (std::any_of(c.mixers.begin(), c.mixers.end(), [](MixerKind m) { return m == MixerKind::ShortConv; }) ||
      !c.attention_output_gate || !c.zero_centred_norms || c.shared_expert_intermediate_size <= 0 ||
      c.rotary_dim <= 0) {
    fail(ErrorKind::Value, kOp, "{} has Gated DeltaNet and gated attention layers, zero-centred norms, partial RoPE "
         "and a shared expert", c.model_type);
  }
  const DeltaNetGeometry& d = c.delta_net;
  json j = qwen_common_json(c);
  put_qwen_moe_keys(j, c);
  j["linear_conv_kernel_dim"] = d.conv_kernel;
  j["linear_key_head_dim"] = d.key_head_dim;
  j["linear_num_key_heads"] = d.num_key_heads;
  j["linear_num_value_heads"] = d.num_value_heads;
  j["linear_value_head_dim"] = d.value_head_dim;
  j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
  json layer_types = json::array();
  for (MixerKind m : c.mixers) layer_types.push_back(m == MixerKind::Attention ? "full_attention" : "linear_attention");
  j["layer_types"] = layer_types;
  return j;
}

json qwen3_next_json(const ModelConfig& c) {
  json j = qwen_hybrid_text_json(c);
  put_mlp_only_layers(j, c);
  // Qwen3-Next's own file: layer_types left out when full_attention_interval gives them.
  int64_t interval = 0;
  for (int64_t i = 0; i < c.num_layers && interval == 0; ++i) {
    if (c.mixers[i] == MixerKind::Attention) interval = i + 1;
  }
  bool periodic = interval > 0;
  for (int64_t i = 0; i < c.num_layers && periodic; ++i) {
    periodic = (c.mixers[i] == MixerKind::Attention) == ((i + 1) % interval == 0);
  }
  if (periodic) {
    j.erase("layer_types");
    j["full_attention_interval"] = interval;
  }
  j["architectures"] = {"Qwen3NextForCausalLM"};
  j["model_type"] = "qwen3_next";
  j["partial_rotary_factor"] = static_cast<double>(c.rotary_dim) / static_cast<double>(c.head_dim);
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = c.rope_theta;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = dtype_string(c.dtype);
  j["transformers_version"] = "4.57.0";
  if (c.intermediate_size > 0) j["intermediate_size"] = c.intermediate_size;
  return j;
}

json qwen3_5_moe_json(const ModelConfig& c) {
  if (std::find(c.moe_layers.begin(), c.moe_layers.end(), false) != c.moe_layers.end()) {
    fail(ErrorKind::Value, kOp, "qwen3_5_moe has a sparse MoE block in every layer");
  }
  json text = qwen_hybrid_text_json(c);
  // M-RoPE sections over the rotary_dim / 2 frequency slots (11, 11, 10 of 32 in the
  // real model); for text all three position streams are the token position.
  const int64_t half = c.rotary_dim / 2, t = (half + 2) / 3, h = std::min(t, half - t);
  text["attn_output_gate"] = true;
  text["dtype"] = dtype_string(c.dtype);
  text["model_type"] = "qwen3_5_moe_text";
  text["rope_parameters"] = {{"mrope_interleaved", true},
                             {"mrope_section", {t, h, half - t - h}},
                             {"partial_rotary_factor",
                              static_cast<double>(c.rotary_dim) / static_cast<double>(c.head_dim)},
                             {"rope_theta", c.rope_theta},
                             {"rope_type", "default"}};
  // The vision tower's geometry (Qwen3.5-35B-A3B's); kiln writes and reads none of its
  // tensors.
  const json vision = {{"depth", 27},
                       {"hidden_act", "gelu_pytorch_tanh"},
                       {"hidden_size", 1152},
                       {"in_channels", 3},
                       {"intermediate_size", 4304},
                       {"model_type", "qwen3_5_moe_vision"},
                       {"num_heads", 16},
                       {"num_position_embeddings", 2304},
                       {"out_hidden_size", c.hidden_size},
                       {"patch_size", 16},
                       {"spatial_merge_size", 2},
                       {"temporal_patch_size", 2}};
  return {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
          {"model_type", "qwen3_5_moe"},
          {"text_config", text},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"transformers_version", "5.3.0"},
          {"vision_config", vision}};
}

json lfm2_moe_json(const ModelConfig& c) {
  const int64_t dense_layers = std::find(c.moe_layers.begin(), c.moe_layers.end(), true) - c.moe_layers.begin();
  if (std::find(c.moe_layers.begin() + dense_layers, c.moe_layers.end(), false) != c.moe_layers.end() ||
      c.scoring != MoeScoring::Sigmoid || c.head_dim * c.num_heads != c.hidden_size) {
    fail(ErrorKind::Value, kOp, "lfm2_moe has its dense layers first, sigmoid routing and head_dim = hidden_size / "
         "num_attention_heads");
  }
  json layer_types = json::array();
  for (MixerKind m : c.mixers) layer_types.push_back(m == MixerKind::Attention ? "full_attention" : "conv");
  json j = {
      {"architectures", {"Lfm2MoeForCausalLM"}},
      {"conv_L_cache", c.conv_kernel},
      {"conv_bias", false},
      {"dtype", dtype_string(c.dtype)},
      {"hidden_size", c.hidden_size},
      {"initializer_range", 0.02},
      {"layer_types", layer_types},
      {"max_position_embeddings", c.max_position_embeddings},
      {"model_type", "lfm2_moe"},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"norm_eps", c.norm_eps},
      {"norm_topk_prob", c.norm_topk_prob},
      {"num_attention_heads", c.num_heads},
      {"num_dense_layers", dense_layers},
      {"num_experts", c.num_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"num_hidden_layers", c.num_layers},
      {"num_key_value_heads", c.num_kv_heads},
      {"rope_theta", c.rope_theta},
      {"routed_scaling_factor", c.routed_scaling_factor},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"transformers_version", "4.57.0"},
      {"use_cache", true},
      {"use_expert_bias", c.use_expert_bias},
      {"vocab_size", c.vocab_size},
  };
  if (c.intermediate_size > 0) j["intermediate_size"] = c.intermediate_size;
  return j;
}

}  // namespace

std::string model_config_to_json(const ModelConfig& c) {
  if (static_cast<int64_t>(c.mixers.size()) != c.num_layers ||
      static_cast<int64_t>(c.moe_layers.size()) != c.num_layers) {
    fail(ErrorKind::Value, kOp, "mixers ({}) and moe_layers ({}) must list num_layers ({}) entries", c.mixers.size(),
         c.moe_layers.size(), c.num_layers);
  }
  if (c.intermediate_size <= 0 && std::find(c.moe_layers.begin(), c.moe_layers.end(), false) != c.moe_layers.end()) {
    fail(ErrorKind::Value, kOp, "intermediate_size must be positive when some layer is dense");
  }
  json j;
  switch (c.arch) {
    case Arch::Qwen3Moe: j = qwen3_moe_json(c); break;
    case Arch::Lfm2Moe: j = lfm2_moe_json(c); break;
    case Arch::Qwen3: j = qwen3_json(c); break;
    case Arch::Qwen3Next: j = qwen3_next_json(c); break;
    case Arch::Qwen35Moe: j = qwen3_5_moe_json(c); break;
  }
  put_token_ids(c.arch == Arch::Qwen35Moe ? j["text_config"] : j, c);
  if (c.fp8_block_scaled) j["quantization_config"] = fp8_quantization(c);
  return j.dump(2) + "\n";
}

}  // namespace kiln::llm
