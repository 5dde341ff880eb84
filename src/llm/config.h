// A model's config.json (and generation_config.json) as the typed facts the runtime
// needs (spec: models.md §1.1, §2.1, §3.1, §4.1, §5, §8). Only the architectures kiln runs are
// accepted; anything else is a clear error naming the file and the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/ops/moe.h"  // MoeScoring: the op's enum is the one name for router scoring

namespace kiln::llm {

enum class Arch { Qwen3Moe, Lfm2Moe, Qwen3, Qwen3Next, Qwen35Moe };

// Token mixer of one decoder layer. GatedDeltaNet is Qwen3-Next's and Qwen3.5's linear
// attention (`layer_types` "linear_attention").
enum class MixerKind { Attention, ShortConv, GatedDeltaNet };

// Geometry of the Gated DeltaNet layers (spec: models.md §2.4): Hk key heads of dk,
// Hv value heads of dv (Hv a multiple of Hk), a causal conv of `conv_kernel` taps over
// the 2*Hk*dk + Hv*dv channels of [q | k | v].
struct DeltaNetGeometry {
  int64_t num_key_heads = 0;
  int64_t num_value_heads = 0;
  int64_t key_head_dim = 0;
  int64_t value_head_dim = 0;
  int64_t conv_kernel = 0;

  int64_t key_dim() const { return num_key_heads * key_head_dim; }
  int64_t value_dim() const { return num_value_heads * value_head_dim; }
  int64_t conv_channels() const { return 2 * key_dim() + value_dim(); }
};

// Sampling defaults a checkpoint ships in generation_config.json (absent keys stay unset).
struct GenerationDefaults {
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<bool> do_sample;
};

struct ModelConfig {
  Arch arch = Arch::Qwen3Moe;
  std::string model_type;  // as written in the file: "qwen3_moe", "lfm2_moe", "qwen3", "qwen3_next", "qwen3_5_moe"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // explicit `head_dim`, else hidden_size / num_heads
  double norm_eps = 1e-6;  // rms_norm_eps (Qwen) or norm_eps (LFM2)
  double rope_theta = 10000.0;  // top level or rope_parameters.rope_theta
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;  // LFM2 may spell it tie_embedding

  std::vector<MixerKind> mixers;  // one per layer
  std::vector<bool> moe_layers;   // one per layer: MoE FFN (true) or dense SwiGLU (false)
  int64_t conv_kernel = 0;        // LFM2 conv_L_cache (short-conv kernel size)

  // Qwen3-Next / Qwen3.5 (spec §2): gated attention, zero-centred norms, partial RoPE,
  // Gated DeltaNet layers and a shared expert in every MoE layer.
  int64_t rotary_dim = 0;              // rotated dims per head (partial_rotary_factor * head_dim); 0 = head_dim
  bool attention_output_gate = false;  // q_proj holds [query | gate] per head; out *= sigmoid(gate)
  bool zero_centred_norms = false;     // every RMSNorm but the DeltaNet output norm scales by (1 + w)
  DeltaNetGeometry delta_net;
  int64_t shared_expert_intermediate_size = 0;  // 0 = no shared expert

  int64_t intermediate_size = 0;      // dense SwiGLU width
  int64_t moe_intermediate_size = 0;  // expert width
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  MoeScoring scoring = MoeScoring::Softmax;  // how router logits become expert scores
  bool norm_topk_prob = false;
  bool use_expert_bias = false;  // LFM2: selection-only bias
  double routed_scaling_factor = 1.0;

  DType dtype = DType::BFloat16;  // torch_dtype / dtype of the checkpoint
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::vector<int64_t> eos_token_ids;  // union of config.json and generation_config.json

  // quantization_config {quant_method: fp8, weight_block_size: [128, 128]}: weights
  // stored float8_e4m3fn with `weight_scale_inv` block scales.
  bool fp8_block_scaled = false;
  GenerationDefaults generation;
  // Where the checkpoint stores the decoder's tensors: Qwen3.5 keeps the text tower under
  // "model.language_model." (the synthetic writer follows it; Checkpoint reads those
  // names as "model." and skips the vision tower and MTP head).
  std::string weight_prefix = "model.";
};

// Reads DIR/config.json (required) and DIR/generation_config.json (optional).
ModelConfig load_model_config(const std::string& dir);
// Parses config.json text; `source` names the file in errors. generation_json may be
// empty (no generation_config.json).
ModelConfig parse_model_config(const std::string& config_json, const std::string& source,
                               const std::string& generation_json = "");
// The config.json text Hugging Face writes for `config` (used by `kiln make-model`);
// parse_model_config of it gives `config` back.
std::string model_config_to_json(const ModelConfig& config);

}  // namespace kiln::llm
