// Geometries of `kiln make-model` presets: two small ones sized for tests and demos, and
// the real Qwen3-30B-A3B and LFM2-8B-A1B (spec models.md §1.1, §3.1).
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

}  // namespace

ModelConfig synthetic_model_config(const std::string& arch, const std::string& preset,
                                   std::optional<int64_t> num_layers, bool fp8) {
  ModelConfig c;
  if (arch == "qwen3_moe") {
    c = qwen3_moe_preset(preset);
  } else if (arch == "lfm2_moe") {
    c = lfm2_moe_preset(preset);
  } else {
    fail(ErrorKind::Value, kOp, "unknown arch '{}' (expected qwen3_moe or lfm2_moe)", arch);
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
