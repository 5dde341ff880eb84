// ModelConfig -> the config.json transformers writes for Qwen3MoeForCausalLM and
// Lfm2MoeForCausalLM (keys sorted, as PretrainedConfig.to_json_string does), so that
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
    if (c.arch == Arch::Qwen3Moe) {
      keep.push_back(layer + "input_layernorm");
      if (c.moe_layers[i]) keep.push_back(layer + "mlp.gate");
      keep.push_back(layer + "post_attention_layernorm");
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

json qwen3_moe_json(const ModelConfig& c) {
  if (std::any_of(c.mixers.begin(), c.mixers.end(), [](MixerKind m) { return m != MixerKind::Attention; }) ||
      c.scoring != MoeScoring::Softmax || c.use_expert_bias || c.routed_scaling_factor != 1.0) {
    fail(ErrorKind::Value, kOp, "qwen3_moe has attention in every layer, softmax routing, no expert bias and no "
         "routed scaling");
  }
  json mlp_only = json::array();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!c.moe_layers[i]) mlp_only.push_back(i);
  }
  json j = {
      {"architectures", {"Qwen3MoeForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"decoder_sparse_step", 1},
      {"head_dim", c.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"initializer_range", 0.02},
      {"max_position_embeddings", c.max_position_embeddings},
      {"max_window_layers", c.num_layers},
      {"mlp_only_layers", mlp_only},
      {"model_type", "qwen3_moe"},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"norm_topk_prob", c.norm_topk_prob},
      {"num_attention_heads", c.num_heads},
      {"num_experts", c.num_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"num_hidden_layers", c.num_layers},
      {"num_key_value_heads", c.num_kv_heads},
      {"output_router_logits", false},
      {"rms_norm_eps", c.norm_eps},
      {"rope_scaling", nullptr},
      {"rope_theta", c.rope_theta},
      {"router_aux_loss_coef", 0.001},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"torch_dtype", dtype_string(c.dtype)},
      {"transformers_version", "4.51.0"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", c.vocab_size},
  };
  if (c.intermediate_size > 0) j["intermediate_size"] = c.intermediate_size;
  return j;
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
  json j = c.arch == Arch::Qwen3Moe ? qwen3_moe_json(c) : lfm2_moe_json(c);
  put_token_ids(j, c);
  if (c.fp8_block_scaled) j["quantization_config"] = fp8_quantization(c);
  return j.dump(2) + "\n";
}

}  // namespace kiln::llm
