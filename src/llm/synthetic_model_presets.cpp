// Geometries of `kiln make-model` presets: small ones sized for tests and demos, and the
// real Qwen3-30B-A3B, LFM2-8B-A1B, Qwen3-8B, Qwen3-Next-80B-A3B and Qwen3.5-35B-A3B
// (spec models.md §1.1, §2.1, §3.1, §4.1).
#include <string>
#include <vector>

#include "kiln/error.h"
#include "llm/synthetic_model.h"

namespace kiln::llm {
namespace {

constexpr const char* kOp = "make-model";

ModelConfig qwen3_moe_base() {
  ModelConfig c;
  c.arch = Arch::Qwen3Moe;
  c.model_type = "qwen3_moe";
  c.norm_eps = 1e-6;
  c.rope_theta = 1'000'000.0;
  c.tie_word_embeddings = false;
  c.scoring = MoeScoring::Softmax;
  c.norm_topk_prob = true;
  c.dtype = DType::BFloat16;
  return c;
}

ModelConfig lfm2_moe_base() {
  ModelConfig c;
  c.arch = Arch::Lfm2Moe;
  c.model_type = "lfm2_moe";
  c.norm_eps = 1e-5;
  c.rope_theta = 1'000'000.0;
  c.tie_word_embeddings = true;
  c.scoring = MoeScoring::Sigmoid;
  c.norm_topk_prob = true;
  c.use_expert_bias = true;
  c.routed_scaling_factor = 1.0;
  c.conv_kernel = 3;
  c.dtype = DType::BFloat16;
  return c;
}

// "c" short conv, "A" attention.
std::vector<MixerKind> mixers_from(const std::string& pattern) {
  std::vector<MixerKind> mixers;
  for (char ch : pattern) mixers.push_back(ch == 'A' ? MixerKind::Attention : MixerKind::ShortConv);
  return mixers;
}

std::vector<bool> dense_first(int64_t layers, int64_t dense) {
  std::vector<bool> moe(layers, true);
  for (int64_t i = 0; i < dense && i < layers; ++i) moe[i] = false;
  return moe;
}

void set_geometry(ModelConfig& c, int64_t vocab, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim,
                  int64_t intermediate, int64_t moe_intermediate, int64_t experts, int64_t top_k,
                  int64_t max_positions) {
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.intermediate_size = intermediate;
  c.moe_intermediate_size = moe_intermediate;
  c.num_experts = experts;
  c.num_experts_per_tok = top_k;
  c.max_position_embeddings = max_positions;
}

ModelConfig qwen3_moe_preset(const std::string& preset) {
  ModelConfig c = qwen3_moe_base();
  if (preset == "tiny") {
    set_geometry(c, 512, 64, 4, 2, 16, 128, 32, 8, 2, 4096);
    c.moe_layers = {true, false, true};  // one dense layer (mlp_only_layers [1]) keeps that path tested
  } else if (preset == "demo") {
    set_geometry(c, 4096, 512, 8, 2, 64, 1536, 192, 32, 4, 4096);
    c.moe_layers.assign(8, true);
  } else if (preset == "qwen3-30b-a3b") {
    set_geometry(c, 151936, 2048, 32, 4, 128, 6144, 768, 128, 8, 40960);
    c.moe_layers.assign(48, true);
  } else {
    fail(ErrorKind::Value, kOp, "unknown preset '{}' for qwen3_moe (expected tiny, demo or qwen3-30b-a3b)", preset);
  }
  c.num_layers = static_cast<int64_t>(c.moe_layers.size());
  c.mixers.assign(c.num_layers, MixerKind::Attention);
  return c;
}

ModelConfig lfm2_moe_preset(const std::string& preset) {
  ModelConfig c = lfm2_moe_base();
  if (preset == "tiny") {
    set_geometry(c, 512, 64, 4, 2, 16, 128, 32, 8, 2, 4096);
    c.mixers = mixers_from("cAcA");
    c.moe_layers = dense_first(4, 1);
  } else if (preset == "demo") {
    set_geometry(c, 4096, 512, 8, 2, 64, 1024, 192, 32, 4, 4096);
    c.mixers = mixers_from("ccAccAcA");
    c.moe_layers = dense_first(8, 1);
  } else if (preset == "lfm2-8b-a1b") {
    set_geometry(c, 65536, 2048, 32, 8, 64, 7168, 1792, 32, 4, 128000);
    c.mixers = mixers_from("ccAcccAcccAcccAcccAccAcc");  // attention at 2, 6, 10, 14, 18, 21
    c.moe_layers = dense_first(24, 2);
  } else {
    fail(ErrorKind::Value, kOp, "unknown preset '{}' for lfm2_moe (expected tiny, demo or lfm2-8b-a1b)", preset);
  }
  c.num_layers = static_cast<int64_t>(c.mixers.size());
  return c;
}

ModelConfig qwen3_preset(const std::string& preset) {
  ModelConfig c = qwen3_moe_base();
  c.arch = Arch::Qwen3;
  c.model_type = "qwen3";
  c.norm_topk_prob = false;
  if (preset == "tiny") {
    set_geometry(c, 512, 64, 4, 2, 16, 128, 0, 0, 0, 4096);
    c.num_layers = 3;
  } else if (preset == "qwen3-8b") {
    set_geometry(c, 151936, 4096, 32, 8, 128, 12288, 0, 0, 0, 40960);
    c.num_layers = 36;
  } else {
    fail(ErrorKind::Value, kOp, "unknown preset '{}' for qwen3 (expected tiny or qwen3-8b)", preset);
  }
  c.mixers.assign(c.num_layers, MixerKind::Attention);
  c.moe_layers.assign(c.num_layers, false);
  return c;
}

// Full attention at every `interval`-th layer ((i + 1) % interval == 0), Gated DeltaNet
// elsewhere (the hybrids' full_attention_interval).
std::vector<MixerKind> hybrid_mixers(int64_t layers, int64_t interval) {
  std::vector<MixerKind> mixers;
  for (int64_t i = 0; i < layers; ++i) {
    mixers.push_back((i + 1) % interval == 0 ? MixerKind::Attention : MixerKind::GatedDeltaNet);
  }
  return mixers;
}

// Qwen3-Next and Qwen3.5: theta 1e7, a quarter of each attention head rotated, gated
// attention, zero-centred norms, a shared expert as wide as the routed ones.
ModelConfig qwen_hybrid_preset(const std::string& arch, const std::string& preset) {
  ModelConfig c = qwen3_moe_base();
  const bool next = arch == "qwen3_next";
  c.arch = next ? Arch::Qwen3Next : Arch::Qwen35Moe;
  c.model_type = arch;
  c.rope_theta = 10'000'000.0;
  c.attention_output_gate = true;
  c.zero_centred_norms = true;
  c.norm_topk_prob = true;
  if (!next) c.weight_prefix = "model.language_model.";
  if (preset == "tiny") {
    // Two key heads feeding four value heads, kernel 4, head_dim 32 (8 rotated dims);
    // attention at layers 1 and 3. Qwen3-Next keeps layer 0 dense (mlp_only_layers).
    set_geometry(c, 512, 64, 4, 2, 32, 96, 32, 8, 2, 4096);
    c.delta_net = {2, 4, 16, 16, 4};
    c.num_layers = 4;
    c.mixers = hybrid_mixers(4, 2);
    c.moe_layers = next ? std::vector<bool>{false, true, true, true} : std::vector<bool>(4, true);
    c.shared_expert_intermediate_size = 32;
    if (!next) c.intermediate_size = 0;  // every Qwen3.5 layer is MoE
  } else if (next && preset == "qwen3-next-80b-a3b") {
    set_geometry(c, 151936, 2048, 16, 2, 256, 5120, 512, 512, 10, 262144);
    c.delta_net = {16, 32, 128, 128, 4};
    c.num_layers = 48;
    c.mixers = hybrid_mixers(48, 4);
    c.moe_layers.assign(48, true);
    c.shared_expert_intermediate_size = 512;
  } else if (!next && preset == "qwen3.5-35b-a3b") {
    set_geometry(c, 248320, 2048, 16, 2, 256, 0, 512, 256, 8, 262144);
    c.delta_net = {16, 32, 128, 128, 4};
    c.num_layers = 40;
    c.mixers = hybrid_mixers(40, 4);
    c.moe_layers.assign(40, true);
    c.shared_expert_intermediate_size = 512;
  } else {
    fail(ErrorKind::Value, kOp, "unknown preset '{}' for {} (expected tiny or {})", preset, arch,
         next ? "qwen3-next-80b-a3b" : "qwen3.5-35b-a3b");
  }
  c.rotary_dim = c.head_dim / 4;
  return c;
}

}  // namespace

ModelConfig synthetic_model_config(const std::string& arch, const std::string& preset,
                                   std::optional<int64_t> num_layers, bool fp8) {
  ModelConfig c;
  if (arch == "qwen3_moe") {
    c = qwen3_moe_preset(preset);
  } else if (arch == "lfm2_moe") {
    c = lfm2_moe_preset(preset);
  } else if (arch == "qwen3") {
    c = qwen3_preset(preset);
  } else if (arch == "qwen3_next" || arch == "qwen3_5_moe") {
    c = qwen_hybrid_preset(arch, preset);
  } else {
    fail(ErrorKind::Value, kOp, "unknown arch '{}' (expected qwen3_moe, lfm2_moe, qwen3, qwen3_next or qwen3_5_moe)",
         arch);
  }
  if (num_layers) {
    if (*num_layers < 1 || *num_layers > c.num_layers) {
      fail(ErrorKind::Value, kOp, "--layers {}: preset '{}' has {} layers, expected 1..{}", *num_layers, preset,
           c.num_layers, c.num_layers);
    }
    c.num_layers = *num_layers;
    c.mixers.resize(c.num_layers);
    c.moe_layers.resize(c.num_layers);
  }
  c.fp8_block_scaled = fp8;
  return c;
}

}  // namespace kiln::llm
