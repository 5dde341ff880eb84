// config.json parsing: the real Qwen3-30B-A3B and LFM2-8B-A1B files (spec models.md §1.1,
// §3.1, copied below as transformers writes them), the variants real files use, the round
// trip through model_config_to_json, and every error path.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/config.h"
#include "llm_test_files.h"
#include "test_util.h"

using namespace kiln;
using namespace kiln::llm;
using kiln::testing::expect_error;
using nlohmann::json;

namespace {

const char* kQwen3_30B_A3B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
  "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
  "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": false,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

const char* kQwen3Generation = R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
  "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"})";

const char* kLfm2_8B_A1B = R"({
  "architectures": ["Lfm2MoeForCausalLM"], "bos_token_id": 1, "conv_L_cache": 3, "conv_bias": false,
  "dtype": "bfloat16", "eos_token_id": 7, "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 7168,
  "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "conv", "full_attention", "conv", "conv", "conv",
                  "full_attention", "conv", "conv", "conv", "full_attention", "conv", "conv", "conv", "full_attention",
                  "conv", "conv", "full_attention", "conv", "conv"],
  "max_position_embeddings": 128000, "model_type": "lfm2_moe", "moe_intermediate_size": 1792, "norm_eps": 1e-05,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_dense_layers": 2, "num_experts": 32,
  "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8, "pad_token_id": 0,
  "rope_theta": 1000000.0, "routed_scaling_factor": 1.0, "tie_embedding": true,
  "transformers_version": "4.57.0.dev0", "use_cache": true, "use_expert_bias": true, "vocab_size": 65536})";

const char* kFp8Quantization = R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
  "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]})";

// The real file with `edit` applied.
std::string edited(const char* base, const std::function<void(json&)>& edit) {
  json j = json::parse(base);
  edit(j);
  return j.dump();
}

void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.mixers, b.mixers);
  EXPECT_EQ(a.moe_layers, b.moe_layers);
  EXPECT_EQ(a.conv_kernel, b.conv_kernel);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.scoring, b.scoring);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.use_expert_bias, b.use_expert_bias);
  EXPECT_EQ(a.routed_scaling_factor, b.routed_scaling_factor);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.pad_token_id, b.pad_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.fp8_block_scaled, b.fp8_block_scaled);
}

}  // namespace

TEST(Config, ParsesQwen3_30B_A3B) {
  const ModelConfig c = parse_model_config(kQwen3_30B_A3B, "q/config.json", kQwen3Generation);
  EXPECT_EQ(c.arch, Arch::Qwen3Moe);
  EXPECT_EQ(c.model_type, "qwen3_moe");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_layers, 48);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 128);  // explicit: 32 * 128 = 4096 != hidden
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.mixers, std::vector<MixerKind>(48, MixerKind::Attention));
  EXPECT_EQ(c.moe_layers, std::vector<bool>(48, true));
  EXPECT_EQ(c.intermediate_size, 6144);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.scoring, MoeScoring::Softmax);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.use_expert_bias);
  EXPECT_EQ(c.routed_scaling_factor, 1.0);
  EXPECT_EQ(c.dtype, DType::BFloat16);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));  // config's first, then the union
  EXPECT_FALSE(c.fp8_block_scaled);
  EXPECT_EQ(c.generation.temperature, 0.6);
  EXPECT_EQ(c.generation.top_k, 20);
  EXPECT_EQ(c.generation.top_p, 0.95);
  EXPECT_FALSE(c.generation.min_p.has_value());
  EXPECT_FALSE(c.generation.repetition_penalty.has_value());
  EXPECT_EQ(c.generation.do_sample, true);
}

TEST(Config, ParsesLfm2_8B_A1B) {
  const ModelConfig c = parse_model_config(kLfm2_8B_A1B, "l/config.json");
  EXPECT_EQ(c.arch, Arch::Lfm2Moe);
  EXPECT_EQ(c.vocab_size, 65536);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_layers, 24);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);  // hidden / heads
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.max_position_embeddings, 128000);
  EXPECT_TRUE(c.tie_word_embeddings);  // spelled tie_embedding
  for (int64_t i = 0; i < 24; ++i) {
    const bool attention = i == 2 || i == 6 || i == 10 || i == 14 || i == 18 || i == 21;
    EXPECT_EQ(c.mixers[i], attention ? MixerKind::Attention : MixerKind::ShortConv) << i;
    EXPECT_EQ(c.moe_layers[i], i >= 2) << i;
  }
  EXPECT_EQ(c.conv_kernel, 3);
  EXPECT_EQ(c.intermediate_size, 7168);
  EXPECT_EQ(c.moe_intermediate_size, 1792);
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.scoring, MoeScoring::Sigmoid);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.use_expert_bias);
  EXPECT_EQ(c.routed_scaling_factor, 1.0);
  EXPECT_EQ(c.dtype, DType::BFloat16);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{7});
  EXPECT_FALSE(c.generation.temperature.has_value());
}

TEST(Config, AcceptsTheSpellingsRealFilesUse) {
  // transformers v5 export: rope_parameters, other layer-type names, tie_word_embeddings.
  const ModelConfig lfm = parse_model_config(edited(kLfm2_8B_A1B, [](json& j) {
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_theta", 5e6}, {"rope_type", "default"}};
    j["layer_types"][0] = "attention";
    j["layer_types"][1] = "attn";
    j["layer_types"][3] = "short_conv";
    j.erase("tie_embedding");
    j["tie_word_embeddings"] = false;
    j["eos_token_id"] = {7, 2};
  }), "l/config.json", R"({"eos_token_id": 2, "min_p": 0.15, "repetition_penalty": 1.05, "top_k": null})");
  EXPECT_EQ(lfm.rope_theta, 5e6);
  EXPECT_EQ(lfm.mixers[0], MixerKind::Attention);
  EXPECT_EQ(lfm.mixers[1], MixerKind::Attention);
  EXPECT_EQ(lfm.mixers[3], MixerKind::ShortConv);
  EXPECT_FALSE(lfm.tie_word_embeddings);
  EXPECT_EQ(lfm.eos_token_ids, (std::vector<int64_t>{7, 2}));
  EXPECT_EQ(lfm.generation.min_p, 0.15);
  EXPECT_EQ(lfm.generation.repetition_penalty, 1.05);
  EXPECT_FALSE(lfm.generation.top_k.has_value());

  // tie_embedding wins over tie_word_embeddings, as in transformers.
  const ModelConfig tied = parse_model_config(edited(kLfm2_8B_A1B, [](json& j) {
    j["tie_embedding"] = false;
    j["tie_word_embeddings"] = true;
  }), "l/config.json");
  EXPECT_FALSE(tied.tie_word_embeddings);

  // Qwen: head_dim from hidden / heads, sparse step and mlp_only_layers, dtype key.
  const ModelConfig qwen = parse_model_config(edited(kQwen3_30B_A3B, [](json& j) {
    j.erase("head_dim");
    j["decoder_sparse_step"] = 2;
    j["mlp_only_layers"] = {3};
    j.erase("torch_dtype");
    j["dtype"] = "float16";
    j["num_hidden_layers"] = 6;
    j["rope_scaling"] = {{"rope_type", "default"}};
  }), "q/config.json");
  EXPECT_EQ(qwen.head_dim, 64);
  EXPECT_EQ(qwen.moe_layers, (std::vector<bool>{false, true, false, false, false, true}));
  EXPECT_EQ(qwen.dtype, DType::Float16);

  // Every layer MoE: the dense width may be absent.
  const ModelConfig no_dense = parse_model_config(edited(kQwen3_30B_A3B, [](json& j) { j.erase("intermediate_size"); }),
                                                  "q/config.json");
  EXPECT_EQ(no_dense.intermediate_size, 0);
}

TEST(Config, RoundTripsThroughModelConfigToJson) {
  for (const char* text : {kQwen3_30B_A3B, kLfm2_8B_A1B}) {
    for (bool fp8 : {false, true}) {
      const std::string source = edited(text, [&](json& j) {
        if (fp8) j["quantization_config"] = json::parse(kFp8Quantization);
      });
      const ModelConfig c = parse_model_config(source, "config.json");
      const std::string written = model_config_to_json(c);
      SCOPED_TRACE(written);
      expect_same_config(parse_model_config(written, "config.json"), c);
      EXPECT_EQ(json::parse(written).contains("quantization_config"), fp8);
    }
  }
  // What transformers writes: every key of the real files is there with the same value.
  for (const char* text : {kQwen3_30B_A3B, kLfm2_8B_A1B}) {
    const json real = json::parse(text);
    const json written = json::parse(model_config_to_json(parse_model_config(text, "config.json")));
    for (const auto& [key, value] : real.items()) {
      if (key == "transformers_version" || key == "tie_embedding") continue;
      ASSERT_TRUE(written.contains(key)) << key;
      EXPECT_EQ(written[key], value) << key;
    }
  }
  const json lfm = json::parse(model_config_to_json(parse_model_config(kLfm2_8B_A1B, "config.json")));
  EXPECT_EQ(lfm["tie_word_embeddings"], true);
  const json quantized = json::parse(model_config_to_json(parse_model_config(
      edited(kQwen3_30B_A3B, [](json& j) { j["quantization_config"] = json::parse(kFp8Quantization); }), "c")));
  EXPECT_EQ(quantized["quantization_config"]["weight_block_size"], json::array({128, 128}));
  EXPECT_EQ(quantized["quantization_config"]["modules_to_not_convert"][0], "lm_head");
  EXPECT_EQ(quantized["quantization_config"]["modules_to_not_convert"][2], "model.layers.0.mlp.gate");
}

TEST(Config, ModelConfigToJsonRefusesWhatTheArchCannotSay) {
  ModelConfig qwen = parse_model_config(kQwen3_30B_A3B, "config.json");
  qwen.mixers[3] = MixerKind::ShortConv;
  expect_error([&] { model_config_to_json(qwen); }, ErrorKind::Value, "qwen3_moe has attention in every layer");
  ModelConfig lfm = parse_model_config(kLfm2_8B_A1B, "config.json");
  lfm.moe_layers[5] = false;
  expect_error([&] { model_config_to_json(lfm); }, ErrorKind::Value, "lfm2_moe has its dense layers first");
  lfm = parse_model_config(kLfm2_8B_A1B, "config.json");
  lfm.mixers.pop_back();
  expect_error([&] { model_config_to_json(lfm); }, ErrorKind::Value, "must list num_layers (24) entries");
  lfm = parse_model_config(kLfm2_8B_A1B, "config.json");
  lfm.intermediate_size = 0;
  expect_error([&] { model_config_to_json(lfm); }, ErrorKind::Value, "intermediate_size must be positive");
  lfm = parse_model_config(kLfm2_8B_A1B, "config.json");
  lfm.dtype = DType::Int8;
  expect_error([&] { model_config_to_json(lfm); }, ErrorKind::Value, "dtype int8 cannot be a checkpoint dtype");
}

struct BadConfig {
  const char* what;
  const char* base;
  std::function<void(json&)> edit;
  ErrorKind kind;
  std::string needle;
};

TEST(Config, EveryErrorNamesFileAndKey) {
  const auto remove = [](const char* key) { return [key](json& j) { j.erase(key); }; };
  const auto set = [](const char* key, json value) { return [key, value](json& j) { j[key] = value; }; };
  const ErrorKind V = ErrorKind::Value, NI = ErrorKind::NotImplemented;
  const char* Q = kQwen3_30B_A3B;
  const char* L = kLfm2_8B_A1B;
  std::vector<BadConfig> cases = {
      {"unsupported family", Q, set("model_type", "llama"), NI,
       "'model_type' is 'llama': supported model types are qwen3_moe, lfm2_moe, qwen3, qwen3_next and qwen3_5_moe"},
      {"unknown family", Q, set("model_type", "bert"), NI, "qwen3_5_moe (qwen3_5_moe_text)"},
      {"vision-only qwen3.5", Q, set("model_type", "qwen3_5_moe"), NI,
       "'text_config' is missing: kiln runs the Qwen3.5 text tower only"},
      {"model_type not a string", Q, set("model_type", 3), V, "'model_type' must be a string, got 3"},
      {"no model_type", Q, remove("model_type"), V, "'model_type' is missing"},
      {"hidden as string", Q, set("hidden_size", "2048"), V, "'hidden_size' must be an integer, got \"2048\""},
      {"hidden fractional", Q, set("hidden_size", 2048.5), V, "'hidden_size' must be an integer, got 2048.5"},
      {"hidden zero", Q, set("hidden_size", 0), V, "'hidden_size' must be positive, got 0"},
      {"vocab negative", Q, set("vocab_size", -1), V, "'vocab_size' must be positive, got -1"},
      {"heads not a multiple of kv heads", Q, set("num_key_value_heads", 5), V,
       "'num_attention_heads' (32) must be a multiple of num_key_value_heads (5)"},
      {"top-k above experts", Q, set("num_experts_per_tok", 129), V,
       "'num_experts_per_tok' (129) exceeds num_experts (128)"},
      {"experts zero", Q, set("num_experts", 0), V, "'num_experts' must be positive"},
      {"no moe width", Q, remove("moe_intermediate_size"), V, "'moe_intermediate_size' is missing"},
      {"no layers", Q, remove("num_hidden_layers"), V, "'num_hidden_layers' is missing"},
      {"no kv heads", Q, remove("num_key_value_heads"), V, "'num_key_value_heads' is missing"},
      {"no max positions", Q, remove("max_position_embeddings"), V, "'max_position_embeddings' is missing"},
      {"no eps", Q, remove("rms_norm_eps"), V, "'rms_norm_eps' is missing"},
      {"eps as string", Q, set("rms_norm_eps", "1e-6"), V, "'rms_norm_eps' must be a number"},
      {"no rope theta", Q, remove("rope_theta"), V, "'rope_theta' is missing"},
      {"yarn", Q, set("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}), NI,
       "'rope_scaling.rope_type' is 'yarn': only the default RoPE is supported"},
      {"rope_scaling not an object", Q, set("rope_scaling", 2), V, "'rope_scaling' must be an object"},
      {"attention bias", Q, set("attention_bias", true), NI, "'attention_bias' is true"},
      {"sliding window", Q, set("use_sliding_window", true), NI, "'use_sliding_window' is true"},
      {"gelu", Q, set("hidden_act", "gelu"), NI, "'hidden_act' is 'gelu'"},
      {"tie as string", Q, set("tie_word_embeddings", "yes"), V, "'tie_word_embeddings' must be true or false"},
      {"dense layer out of range", Q, set("mlp_only_layers", {48}), V,
       "'mlp_only_layers' holds 48, expected layer indices in [0, 48)"},
      {"mlp_only_layers not a list", Q, set("mlp_only_layers", 1), V, "'mlp_only_layers' must be a list"},
      {"sparse step zero", Q, set("decoder_sparse_step", 0), V, "'decoder_sparse_step' must be positive"},
      {"dense layer without width", Q,
       [](json& j) {
         j["mlp_only_layers"] = {0};
         j.erase("intermediate_size");
       },
       V, "'intermediate_size' is missing"},
      {"hidden not divisible without head_dim", Q,
       [](json& j) {
         j.erase("head_dim");
         j["hidden_size"] = 2050;
       },
       V, "'hidden_size' (2050) must be a multiple of num_attention_heads (32)"},
      {"eos not ids", Q, set("eos_token_id", "eos"), V, "'eos_token_id' must be an integer or a list of integers"},
      {"eos list of strings", Q, set("eos_token_id", {1, "x"}), V, "'eos_token_id' must be an integer or a list"},
      {"bos as string", Q, set("bos_token_id", "1"), V, "'bos_token_id' must be an integer"},
      {"int8 dtype", Q, set("torch_dtype", "int8"), V, "'torch_dtype' is 'int8', expected bfloat16, float16 or "
       "float32"},
      {"fp8 other blocks", Q, set("quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {64, 64}}}),
       NI, "'quantization_config.weight_block_size' is [64,64]: only [128, 128] blocks are supported"},
      {"fp8 per tensor", Q, set("quantization_config", {{"quant_method", "fp8"}}), V,
       "'quantization_config.weight_block_size' is missing"},
      {"awq", Q, set("quantization_config", {{"quant_method", "awq"}}), NI,
       "'quantization_config.quant_method' is 'awq': only fp8"},
      {"static activations", Q,
       set("quantization_config",
           {{"quant_method", "fp8"}, {"activation_scheme", "static"}, {"weight_block_size", {128, 128}}}),
       NI, "'quantization_config.activation_scheme' is 'static'"},
      {"e5m2", Q,
       set("quantization_config", {{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"weight_block_size", {128, 128}}}), NI,
       "'quantization_config.fmt' is 'e5m2'"},
      {"layer_types short", L, [](json& j) { j["layer_types"].erase(23); }, V,
       "'layer_types' must list one type per layer (24 = num_hidden_layers), got 23 entries"},
      {"layer_types not a list", L, set("layer_types", "conv"), V, "'layer_types' must list one type per layer"},
      {"layer_types unknown", L, [](json& j) { j["layer_types"][4] = "mamba"; }, V,
       "'layer_types' [4] is mamba, expected \"conv\" or \"full_attention\""},
      {"no layer_types", L, remove("layer_types"), V, "'layer_types' is missing"},
      {"dense layers past the end", L, set("num_dense_layers", 25), V,
       "'num_dense_layers' is 25, expected 0..24 (num_hidden_layers)"},
      {"no dense layer count", L, remove("num_dense_layers"), V, "'num_dense_layers' is missing"},
      {"no conv width", L, remove("conv_L_cache"), V, "'conv_L_cache' is missing"},
      {"conv bias", L, set("conv_bias", true), NI, "'conv_bias' is true"},
      {"no norm_eps", L, remove("norm_eps"), V, "'norm_eps' is missing"},
      {"lfm2 head_dim", L, set("head_dim", 128), NI, "'head_dim' is 128: LFM2 attention uses hidden_size / "
       "num_attention_heads = 64"},
      {"lfm2 dense width", L, remove("intermediate_size"), V, "'intermediate_size' is missing"},
      {"scaling zero", L, set("routed_scaling_factor", 0.0), V, "'routed_scaling_factor' must be positive"},
      {"rope_parameters yarn", L, set("rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 1e6}}), NI,
       "'rope_parameters.rope_type' is 'yarn'"},
  };
  for (const BadConfig& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string text = edited(c.base, c.edit);
    expect_error([&] { parse_model_config(text, "dir/config.json"); }, c.kind, "config dir/config.json: ");
    expect_error([&] { parse_model_config(text, "dir/config.json"); }, c.kind, c.needle);
  }
  expect_error([&] { parse_model_config("{\"a\":", "dir/config.json"); }, ErrorKind::Value,
               "config dir/config.json: not valid JSON");
  expect_error([&] { parse_model_config("[1]", "dir/config.json"); }, ErrorKind::Value, "expected a JSON object");
  expect_error([&] { parse_model_config(kQwen3_30B_A3B, "dir/config.json", R"({"temperature": "hot"})"); },
               ErrorKind::Value, "config dir/generation_config.json: 'temperature' must be a number");
  expect_error([&] { parse_model_config(kQwen3_30B_A3B, "dir/config.json", R"({"do_sample": 1})"); },
               ErrorKind::Value, "'do_sample' must be true or false");
  expect_error([&] { parse_model_config(kQwen3_30B_A3B, "dir/config.json", R"({"top_k": 2.5})"); }, ErrorKind::Value,
               "'top_k' must be an integer");
  expect_error([&] { parse_model_config(kQwen3_30B_A3B, "dir/config.json", "nope"); }, ErrorKind::Value,
               "config dir/generation_config.json: not valid JSON");
}

TEST(Config, LoadsFromAFolder) {
  kiln::testing::TempDir dir;
  expect_error([&] { load_model_config(dir.str()); }, ErrorKind::Runtime, "config.json: cannot open");
  kiln::testing::write_file(dir.file("config.json"), kQwen3_30B_A3B);
  EXPECT_EQ(load_model_config(dir.str()).eos_token_ids, std::vector<int64_t>{151645});
  kiln::testing::write_file(dir.file("generation_config.json"), kQwen3Generation);
  const ModelConfig c = load_model_config(dir.str());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(c.generation.top_k, 20);
  kiln::testing::write_file(dir.file("generation_config.json"), R"({"top_p": "x"})");
  expect_error([&] { load_model_config(dir.str()); }, ErrorKind::Value, dir.file("generation_config.json"));
}
