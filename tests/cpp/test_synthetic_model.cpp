// Synthetic checkpoints: the tiny presets written, reopened through Checkpoint and
// load_model_config, and checked against tensor lists built independently here from
// spec models.md §1.3 / §3.3 / §5.1; FP8 against the bf16 weights of the same seed;
// determinism; sharding; weight statistics; the real presets' shapes; errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kiln/scalar_types.h"
#include "kiln/thread_pool.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm/synthetic_model.h"
#include "llm/tokenizer.h"
#include "llm_test_files.h"
#include "test_util.h"

using namespace kiln;
using namespace kiln::llm;
using kiln::testing::expect_error;
using kiln::testing::read_file;
using kiln::testing::TempDir;

namespace {

using Expected = std::map<std::string, std::pair<Shape, DType>>;

int64_t ceil128(int64_t n) { return (n + 127) / 128; }

// The checkpoint the tiny presets must produce, written out from the spec tables. Linear
// weights are FP8 with a float32 scale grid when fp8.
Expected expected_tiny(const std::string& arch, bool fp8) {
  const DType bf = DType::BFloat16;
  Expected e;
  const auto linear = [&](const std::string& name, int64_t n, int64_t k) {
    e[name] = {{n, k}, fp8 ? DType::Float8_e4m3fn : bf};
    if (fp8) e[name + "_scale_inv"] = {{ceil128(n), ceil128(k)}, DType::Float32};
  };
  e["model.embed_tokens.weight"] = {{512, 64}, bf};
  if (arch == "qwen3_moe") {
    for (int i = 0; i < 3; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      e[p + "input_layernorm.weight"] = {{64}, bf};
      e[p + "post_attention_layernorm.weight"] = {{64}, bf};
      linear(p + "self_attn.q_proj.weight", 64, 64);  // 4 heads x 16
      linear(p + "self_attn.k_proj.weight", 32, 64);  // 2 kv heads x 16
      linear(p + "self_attn.v_proj.weight", 32, 64);
      linear(p + "self_attn.o_proj.weight", 64, 64);
      e[p + "self_attn.q_norm.weight"] = {{16}, bf};
      e[p + "self_attn.k_norm.weight"] = {{16}, bf};
      if (i == 1) {  // mlp_only_layers [1]
        linear(p + "mlp.gate_proj.weight", 128, 64);
        linear(p + "mlp.up_proj.weight", 128, 64);
        linear(p + "mlp.down_proj.weight", 64, 128);
        continue;
      }
      e[p + "mlp.gate.weight"] = {{8, 64}, bf};
      for (int x = 0; x < 8; ++x) {
        const std::string q = p + "mlp.experts." + std::to_string(x) + ".";
        linear(q + "gate_proj.weight", 32, 64);
        linear(q + "up_proj.weight", 32, 64);
        linear(q + "down_proj.weight", 64, 32);
      }
    }
    e["model.norm.weight"] = {{64}, bf};
    e["lm_head.weight"] = {{512, 64}, bf};
    return e;
  }
  for (int i = 0; i < 4; ++i) {  // conv, attention, conv, attention; layer 0 dense
    const std::string p = "model.layers." + std::to_string(i) + ".";
    e[p + "operator_norm.weight"] = {{64}, bf};
    e[p + "ffn_norm.weight"] = {{64}, bf};
    if (i % 2 == 1) {
      linear(p + "self_attn.q_proj.weight", 64, 64);
      linear(p + "self_attn.k_proj.weight", 32, 64);
      linear(p + "self_attn.v_proj.weight", 32, 64);
      linear(p + "self_attn.out_proj.weight", 64, 64);
      e[p + "self_attn.q_layernorm.weight"] = {{16}, bf};
      e[p + "self_attn.k_layernorm.weight"] = {{16}, bf};
    } else {
      e[p + "conv.conv.weight"] = {{64, 1, 3}, bf};
      linear(p + "conv.in_proj.weight", 192, 64);
      linear(p + "conv.out_proj.weight", 64, 64);
    }
    if (i == 0) {
      linear(p + "feed_forward.w1.weight", 128, 64);
      linear(p + "feed_forward.w3.weight", 128, 64);
      linear(p + "feed_forward.w2.weight", 64, 128);
      continue;
    }
    e[p + "feed_forward.gate.weight"] = {{8, 64}, bf};
    e[p + "feed_forward.expert_bias"] = {{8}, DType::Float32};
    for (int x = 0; x < 8; ++x) {
      const std::string q = p + "feed_forward.experts." + std::to_string(x) + ".";
      linear(q + "w1.weight", 32, 64);
      linear(q + "w3.weight", 32, 64);
      linear(q + "w2.weight", 64, 32);
    }
  }
  e["model.embedding_norm.weight"] = {{64}, bf};  // tied: no lm_head
  return e;
}

std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<float>(t.flatten().at({i}).to_double());
  return v;
}

SyntheticModel write_tiny(const TempDir& dir, const std::string& arch, bool fp8, uint64_t seed = 0) {
  SyntheticModelOptions o;
  o.arch = arch;
  o.preset = "tiny";
  o.fp8 = fp8;
  o.out_dir = dir.str();
  o.seed = seed;
  return write_synthetic_model(o);
}

}  // namespace

TEST(SyntheticModel, TinyCheckpointsHoldExactlyTheHuggingFaceTensors) {
  for (const std::string arch : {"qwen3_moe", "lfm2_moe"}) {
    for (bool fp8 : {false, true}) {
      SCOPED_TRACE(arch + (fp8 ? " fp8" : ""));
      TempDir dir;
      const SyntheticModel model = write_tiny(dir, arch, fp8);
      const Expected expected = expected_tiny(arch, fp8);
      const Checkpoint ckpt = Checkpoint::open(dir.str());
      EXPECT_EQ(ckpt.files(), std::vector<std::string>{dir.file("model.safetensors")});
      std::vector<std::string> names;
      for (const auto& [name, shape_dtype] : expected) {
        names.push_back(name);
        ASSERT_TRUE(ckpt.has(name)) << name;
        EXPECT_NO_THROW(ckpt.get(name, shape_dtype.first, shape_dtype.second)) << name;
      }
      EXPECT_EQ(ckpt.names(), names);  // nothing else
      // The public list agrees with the file.
      const std::vector<CheckpointTensorSpec> specs = checkpoint_tensor_specs(model.config);
      ASSERT_EQ(specs.size(), expected.size());
      for (const CheckpointTensorSpec& s : specs) {
        EXPECT_EQ(ckpt.entry(s.name).shape, s.shape) << s.name;
        EXPECT_EQ(ckpt.entry(s.name).dtype, s.dtype) << s.name;
      }

      const ModelConfig c = load_model_config(dir.str());
      EXPECT_EQ(c.model_type, arch);
      EXPECT_EQ(c.fp8_block_scaled, fp8);
      EXPECT_EQ(c.num_layers, model.config.num_layers);
      EXPECT_EQ(c.moe_layers, model.config.moe_layers);
      EXPECT_EQ(c.mixers, model.config.mixers);
      EXPECT_EQ(c.eos_token_ids, model.config.eos_token_ids);
      EXPECT_EQ(c.generation.temperature, model.config.generation.temperature);
      EXPECT_EQ(c.tie_word_embeddings, arch == "lfm2_moe");

      // The tokenizer's special tokens are the ones the config names.
      const Tokenizer tok = Tokenizer::load(dir.str());
      EXPECT_LE(tok.vocab_size(), c.vocab_size);
      EXPECT_EQ(c.eos_token_ids[0], *tok.token_to_id("<|im_end|>"));
      EXPECT_EQ(c.bos_token_id, arch == "qwen3_moe" ? tok.token_to_id("<|endoftext|>")
                                                     : tok.token_to_id("<|startoftext|>"));
    }
  }
}

TEST(SyntheticModel, Fp8WeightsAreTheBf16WeightsBlockQuantized) {
  TempDir bf16_dir, fp8_dir;
  write_tiny(bf16_dir, "lfm2_moe", false, 3);
  write_tiny(fp8_dir, "lfm2_moe", true, 3);
  const Checkpoint bf16 = Checkpoint::open(bf16_dir.str());
  const Checkpoint fp8 = Checkpoint::open(fp8_dir.str());
  // [192, 64]: two row blocks, the second partial (64 rows).
  const std::string name = "model.layers.0.conv.in_proj.weight";
  const std::vector<float> ref = as_floats(bf16.get(name));
  const Tensor q = fp8.get(name, {192, 64}, DType::Float8_e4m3fn);
  const std::vector<float> scale = as_floats(fp8.get(name + "_scale_inv", {2, 1}, DType::Float32));
  const auto* codes = static_cast<const uint8_t*>(q.data_ptr());
  std::vector<float> block_max(2, 0.0f);
  for (int64_t r = 0; r < 192; ++r) {
    for (int64_t k = 0; k < 64; ++k) {
      const float w = fp8_e4m3fn_bits_to_float(codes[r * 64 + k]) * scale[r / 128];
      const float x = ref[r * 64 + k];
      // Both round the same float32 draw: bf16 to 8 significant bits (relative 2^-9),
      // e4m3 to 4 (relative 2^-4, or half its smallest subnormal 2^-10 times the scale).
      const float tol = std::fabs(x) * (0.0625f + 0.00390625f) + scale[r / 128] * 0.0009765625f;
      EXPECT_NEAR(w, x, tol) << r << "," << k;
      block_max[r / 128] = std::max(block_max[r / 128], std::fabs(fp8_e4m3fn_bits_to_float(codes[r * 64 + k])));
    }
  }
  // scale = amax / 448: the largest element of each block is stored as exactly 448.
  EXPECT_EQ(block_max[0], 448.0f);
  EXPECT_EQ(block_max[1], 448.0f);
  // Routers, norms, conv taps and embeddings are not quantised: identical to bf16.
  for (const std::string kept : {"model.layers.1.feed_forward.gate.weight", "model.layers.1.ffn_norm.weight",
                                 "model.layers.0.conv.conv.weight", "model.embed_tokens.weight",
                                 "model.layers.1.feed_forward.expert_bias"}) {
    EXPECT_EQ(as_floats(fp8.get(kept)), as_floats(bf16.get(kept))) << kept;
  }
}

TEST(SyntheticModel, SameSeedSameBytesOnAnyThreadCount) {
  TempDir a, b, c;
  write_tiny(a, "qwen3_moe", true, 11);
  const int threads = default_thread_pool().num_threads();
  set_num_threads(1);
  write_tiny(b, "qwen3_moe", true, 11);
  set_num_threads(threads);
  write_tiny(c, "qwen3_moe", true, 12);
  for (const char* file : {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json"}) {
    EXPECT_EQ(read_file(a.file(file)), read_file(b.file(file))) << file;
  }
  EXPECT_NE(read_file(a.file("model.safetensors")), read_file(c.file("model.safetensors")));
}

TEST(SyntheticModel, ShardsWithAnIndexAndReplacesStaleFiles) {
  TempDir single, dir;
  write_tiny(single, "qwen3_moe", false);
  SyntheticModelOptions o;
  o.arch = "qwen3_moe";
  o.preset = "tiny";
  o.out_dir = dir.str();
  o.max_shard_bytes = 100'000;
  int64_t calls = 0;
  SyntheticModelProgress last;
  o.progress = [&](const SyntheticModelProgress& p) {
    ++calls;
    last = p;
  };
  const SyntheticModel model = write_synthetic_model(o);
  ASSERT_GT(model.shards.size(), 2u);
  EXPECT_EQ(calls, last.tensors_total);
  EXPECT_EQ(last.bytes_done, last.bytes_total);
  EXPECT_EQ(last.bytes_total, model.tensor_bytes);
  EXPECT_EQ(std::filesystem::path(model.shards[0]).filename(),
            "model-00001-of-0000" + std::to_string(model.shards.size()) + ".safetensors");
  const auto index = nlohmann::json::parse(read_file(dir.file("model.safetensors.index.json")));
  EXPECT_EQ(index["metadata"]["total_size"], model.tensor_bytes);

  const Checkpoint sharded = Checkpoint::open(dir.str());
  const Checkpoint whole = Checkpoint::open(single.str());
  EXPECT_EQ(sharded.files().size(), model.shards.size());
  EXPECT_EQ(sharded.names(), whole.names());
  for (const std::string& name : whole.names()) {
    EXPECT_EQ(as_floats(sharded.get(name)), as_floats(whole.get(name))) << name;
  }

  // Rewriting unsharded in the same folder leaves no stale shard or index behind.
  o.max_shard_bytes = 2'000'000'000;
  write_synthetic_model(o);
  EXPECT_FALSE(std::filesystem::exists(dir.file("model.safetensors.index.json")));
  EXPECT_FALSE(std::filesystem::exists(model.shards[0]));
  EXPECT_EQ(Checkpoint::open(dir.str()).files(), std::vector<std::string>{dir.file("model.safetensors")});
}

TEST(SyntheticModel, WeightsKeepActivationsOrderOneAndSpreadTokensOverExperts) {
  TempDir dir;
  write_tiny(dir, "qwen3_moe", false, 5);
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  const auto stats = [&](const std::string& name) {
    const std::vector<float> v = as_floats(ckpt.get(name));
    double sum = 0, sq = 0;
    for (float x : v) sum += x;
    const double mean = sum / v.size();
    for (float x : v) sq += (x - mean) * (x - mean);
    return std::pair<double, double>(mean, std::sqrt(sq / v.size()));
  };
  // Sample std of n uniform draws: relative standard error sqrt(0.8 / n) / 2 (~0.7% for
  // n = 4096, ~0.3% for 32768); 5% leaves room for bf16 rounding and is still 7+ sigma.
  EXPECT_NEAR(stats("model.layers.0.self_attn.q_proj.weight").second, 1.0 / 8.0, 0.05 / 8.0);  // 1/sqrt(64)
  EXPECT_NEAR(stats("model.layers.1.mlp.down_proj.weight").second, 1.0 / std::sqrt(128.0), 0.05 / std::sqrt(128.0));
  EXPECT_NEAR(stats("model.embed_tokens.weight").second, 1.0, 0.05);
  const auto norm = stats("model.layers.0.input_layernorm.weight");
  EXPECT_NEAR(norm.first, 1.0, 0.02);  // 1 + uniform noise of half-width 0.05
  EXPECT_LT(norm.second, 0.05);

  // Route 32 tokens' embeddings (RMS-normalised, as the layer sees them) through layer 0's
  // router: the top-2 expert sets must differ between tokens.
  const std::vector<float> embed = as_floats(ckpt.get("model.embed_tokens.weight"));
  const std::vector<float> router = as_floats(ckpt.get("model.layers.0.mlp.gate.weight"));
  std::set<std::pair<int, int>> choices;
  std::set<int> experts_used;
  for (int token = 0; token < 32; ++token) {
    const float* x = &embed[token * 64];
    double ms = 0;
    for (int k = 0; k < 64; ++k) ms += x[k] * x[k];
    const double inv_rms = 1.0 / std::sqrt(ms / 64 + 1e-6);
    std::vector<std::pair<double, int>> logits;
    for (int e = 0; e < 8; ++e) {
      double dot = 0;
      for (int k = 0; k < 64; ++k) dot += router[e * 64 + k] * x[k] * inv_rms;
      logits.push_back({dot, e});
    }
    std::sort(logits.rbegin(), logits.rend());
    choices.insert({std::min(logits[0].second, logits[1].second), std::max(logits[0].second, logits[1].second)});
    experts_used.insert(logits[0].second);
    experts_used.insert(logits[1].second);
    EXPECT_GT(logits[0].first - logits[7].first, 1.0);  // logits spread, not near-uniform
  }
  EXPECT_GE(choices.size(), 8u);
  EXPECT_EQ(experts_used.size(), 8u);
}

TEST(SyntheticModel, RealPresetsHaveTheRealShapes) {
  const ModelConfig qwen = synthetic_model_config("qwen3_moe", "qwen3-30b-a3b");
  EXPECT_EQ(qwen.num_layers, 48);
  EXPECT_EQ(qwen.vocab_size, 151936);
  const std::vector<CheckpointTensorSpec> qs = checkpoint_tensor_specs(qwen);
  EXPECT_EQ(qs.size(), 1u + 48 * (8 + 1 + 128 * 3) + 2);
  std::map<std::string, Shape> q;
  for (const auto& s : qs) q[s.name] = s.shape;
  EXPECT_EQ(q["model.layers.47.self_attn.q_proj.weight"], (Shape{4096, 2048}));
  EXPECT_EQ(q["model.layers.47.self_attn.k_proj.weight"], (Shape{512, 2048}));
  EXPECT_EQ(q["model.layers.47.self_attn.o_proj.weight"], (Shape{2048, 4096}));
  EXPECT_EQ(q["model.layers.0.mlp.gate.weight"], (Shape{128, 2048}));
  EXPECT_EQ(q["model.layers.0.mlp.experts.127.down_proj.weight"], (Shape{2048, 768}));
  EXPECT_EQ(q["lm_head.weight"], (Shape{151936, 2048}));

  const ModelConfig lfm = synthetic_model_config("lfm2_moe", "lfm2-8b-a1b", std::nullopt, true);
  std::map<std::string, CheckpointTensorSpec> l;
  for (const auto& s : checkpoint_tensor_specs(lfm)) l[s.name] = s;
  EXPECT_EQ(l.count("lm_head.weight"), 0u);
  EXPECT_EQ(l["model.layers.21.self_attn.q_proj.weight"].shape, (Shape{2048, 2048}));
  EXPECT_EQ(l["model.layers.21.self_attn.k_proj.weight"].shape, (Shape{512, 2048}));
  EXPECT_EQ(l["model.layers.20.conv.in_proj.weight"].shape, (Shape{6144, 2048}));
  EXPECT_EQ(l["model.layers.20.conv.conv.weight"].shape, (Shape{2048, 1, 3}));
  EXPECT_EQ(l["model.layers.1.feed_forward.w1.weight"].shape, (Shape{7168, 2048}));
  EXPECT_EQ(l["model.layers.2.feed_forward.experts.31.w2.weight"].shape, (Shape{2048, 1792}));
  EXPECT_EQ(l["model.layers.2.feed_forward.experts.31.w2.weight_scale_inv"].shape, (Shape{16, 14}));
  EXPECT_EQ(l["model.layers.2.feed_forward.experts.31.w2.weight"].dtype, DType::Float8_e4m3fn);
  EXPECT_EQ(l["model.layers.2.feed_forward.expert_bias"].dtype, DType::Float32);
  EXPECT_EQ(l["model.layers.2.feed_forward.gate.weight"].dtype, DType::BFloat16);
  EXPECT_EQ(l.count("model.layers.2.feed_forward.w1.weight"), 0u);

  // --layers keeps the real layer-type prefix.
  const ModelConfig cut = synthetic_model_config("lfm2_moe", "lfm2-8b-a1b", 3);
  EXPECT_EQ(cut.mixers, (std::vector<MixerKind>{MixerKind::ShortConv, MixerKind::ShortConv, MixerKind::Attention}));
  EXPECT_EQ(cut.moe_layers, (std::vector<bool>{false, false, true}));

  // The demo presets stay at 100-200 MB of bf16.
  for (const char* arch : {"qwen3_moe", "lfm2_moe"}) {
    uint64_t bytes = 0;
    for (const auto& s : checkpoint_tensor_specs(synthetic_model_config(arch, "demo"))) {
      bytes += shape_numel(s.shape) * itemsize(s.dtype);
    }
    EXPECT_GT(bytes, 100'000'000u) << arch;
    EXPECT_LT(bytes, 200'000'000u) << arch;
  }
}

TEST(SyntheticModel, BadOptionsAreErrors) {
  expect_error([] { synthetic_model_config("llama", "tiny"); }, ErrorKind::Value,
               "unknown arch 'llama' (expected qwen3_moe, lfm2_moe, qwen3, qwen3_next or qwen3_5_moe)");
  expect_error([] { synthetic_model_config("qwen3_moe", "huge"); }, ErrorKind::Value, "unknown preset 'huge'");
  expect_error([] { synthetic_model_config("lfm2_moe", "qwen3-30b-a3b"); }, ErrorKind::Value,
               "unknown preset 'qwen3-30b-a3b' for lfm2_moe");
  expect_error([] { synthetic_model_config("qwen3_moe", "tiny", 0); }, ErrorKind::Value,
               "--layers 0: preset 'tiny' has 3 layers, expected 1..3");
  expect_error([] { synthetic_model_config("lfm2_moe", "lfm2-8b-a1b", 25); }, ErrorKind::Value, "expected 1..24");
  TempDir dir;
  kiln::testing::write_file(dir.file("file"), "x");
  SyntheticModelOptions o;
  o.out_dir = dir.file("file");
  expect_error([&] { write_synthetic_model(o); }, ErrorKind::Runtime, "cannot create the output folder");
  o.out_dir = dir.file("file/sub");
  expect_error([&] { write_synthetic_model(o); }, ErrorKind::Runtime, "cannot create the output folder");
  o.out_dir = "";
  expect_error([&] { write_synthetic_model(o); }, ErrorKind::Runtime, "cannot create the output folder ''");
}
