// Model::load and Model::forward beyond the numerics: both expert layouts, every load
// error naming what is wrong, forward's input checks leaving the sequence untouched,
// load options.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kiln/llm.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm_model_test_util.h"
#include "llm_test_files.h"
#include "test_util.h"

namespace kiln::llm {
namespace {

using kiln::testing::copy_model_with;
using kiln::testing::expect_error;
using kiln::testing::read_file;
using kiln::testing::relative_max_difference;
using kiln::testing::TempDir;
using kiln::testing::tiny_model_dir;
using kiln::testing::write_file;

const std::vector<int32_t> kPrompt = {17, 3, 250, 101, 42, 7};

// Transformers v5 / Qwen3.5 on-disk layout (spec §0.6): per MoE layer
// experts.gate_up_proj [E, 2I, H] (gate rows first) and experts.down_proj [E, H, I]
// instead of per-expert tensors. Same numbers, so the logits must be identical.
TEST(LlmModelLoading, FusedExpertLayoutGivesTheSameLogits) {
  for (const std::string arch : {"qwen3_moe", "lfm2_moe"}) {
    SCOPED_TRACE(arch);
    const std::string& dir = tiny_model_dir(arch);
    const ModelConfig c = load_model_config(dir);
    const bool lfm2 = c.arch == Arch::Lfm2Moe;
    TempDir fused;
    Checkpoint original = Checkpoint::open(dir);
    std::vector<std::pair<std::string, Tensor>> fused_tensors;
    for (int64_t i = 0; i < c.num_layers; ++i) {
      if (!c.moe_layers[i]) continue;
      const std::string prefix =
          "model.layers." + std::to_string(i) + (lfm2 ? ".feed_forward.experts" : ".mlp.experts");
      std::vector<Tensor> gate_up, down;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string base = prefix + "." + std::to_string(e) + ".";
        gate_up.push_back(cat({original.get(base + (lfm2 ? "w1" : "gate_proj") + ".weight"),
                               original.get(base + (lfm2 ? "w3" : "up_proj") + ".weight")},
                              0));
        down.push_back(original.get(base + (lfm2 ? "w2" : "down_proj") + ".weight"));
      }
      fused_tensors.emplace_back(prefix + ".gate_up_proj", stack(gate_up, 0));
      fused_tensors.emplace_back(prefix + ".down_proj", stack(down, 0));
    }
    copy_model_with(
        dir, fused.str(), [](const std::string& name, Tensor&) { return name.find(".experts.") == std::string::npos; },
        fused_tensors);

    auto a = Model::load(dir);
    auto b = Model::load(fused.str());
    EXPECT_EQ(relative_max_difference(b->forward(kPrompt, true), a->forward(kPrompt, true)), 0.0);
    EXPECT_EQ(a->info().parameter_count, b->info().parameter_count);

    // Quantised at load, the fused layout gets one scale per row of every expert too.
    LoadOptions fp8;
    fp8.weights = WeightFormat::Fp8;
    auto qa = Model::load(dir, fp8);
    auto qb = Model::load(fused.str(), fp8);
    EXPECT_EQ(relative_max_difference(qb->forward(kPrompt, true), qa->forward(kPrompt, true)), 0.0);
    EXPECT_EQ(qa->info().fp8_quantization->tensors, qb->info().fp8_quantization->tensors);
    EXPECT_DOUBLE_EQ(qa->info().fp8_quantization->max_relative_error, qb->info().fp8_quantization->max_relative_error);
  }
}

TEST(LlmModelLoading, MissingTensorIsNamed) {
  TempDir broken;
  const std::string victim = "model.layers.0.post_attention_layernorm.weight";
  copy_model_with(tiny_model_dir("qwen3_moe"), broken.str(), [&](const std::string& name, Tensor&) {
    return name != victim;
  });
  expect_error([&] { Model::load(broken.str()); }, ErrorKind::Value, "no tensor '" + victim + "'");
}

TEST(LlmModelLoading, MissingExpertIsNamed) {
  TempDir broken;
  const std::string victim = "model.layers.2.feed_forward.experts.5.w3.weight";
  copy_model_with(tiny_model_dir("lfm2_moe"), broken.str(), [&](const std::string& name, Tensor&) {
    return name != victim;
  });
  expect_error([&] { Model::load(broken.str()); }, ErrorKind::Value, victim);
}

TEST(LlmModelLoading, WrongShapeIsNamed) {
  TempDir broken;
  const std::string victim = "model.layers.0.self_attn.q_norm.weight";
  copy_model_with(tiny_model_dir("qwen3_moe"), broken.str(), [&](const std::string& name, Tensor& t) {
    if (name == victim) t = zeros({t.size(0) / 2}, t.dtype());
    return true;
  });
  expect_error([&] { Model::load(broken.str()); }, ErrorKind::Value, victim);
  expect_error([&] { Model::load(broken.str()); }, ErrorKind::Value, "expected shape");
}

TEST(LlmModelLoading, WrongDtypeIsNamed) {
  TempDir broken;
  const std::string victim = "model.norm.weight";
  copy_model_with(tiny_model_dir("qwen3_moe"), broken.str(), [&](const std::string& name, Tensor& t) {
    if (name == victim) t = zeros(t.sizes(), DType::Int32);
    return true;
  });
  expect_error([&] { Model::load(broken.str()); }, ErrorKind::Type, "'" + victim + "' is int32");
}

TEST(LlmModelLoading, Fp8WeightWithoutScaleIsAnError) {
  TempDir broken;
  const std::string victim = "model.layers.0.self_attn.q_proj.weight";
  copy_model_with(tiny_model_dir("qwen3_moe", true), broken.str(), [&](const std::string& name, Tensor&) {
    return name != victim + "_scale_inv";
  });
  expect_error([&] { Model::load(broken.str()); }, ErrorKind::Runtime,
               "'" + victim + "' is float8_e4m3fn but its block scales");
}

TEST(LlmModelLoading, ConvBiasIsRefused) {
  TempDir broken;
  const ModelConfig c = load_model_config(tiny_model_dir("lfm2_moe"));
  copy_model_with(
      tiny_model_dir("lfm2_moe"), broken.str(), [](const std::string&, Tensor&) { return true; },
      {{"model.layers.0.conv.conv.bias", zeros({c.hidden_size}, DType::BFloat16)}});
  expect_error([&] { Model::load(broken.str()); }, ErrorKind::NotImplemented, "conv_bias");
}

TEST(LlmModelLoading, UnknownModelTypeIsAnError) {
  TempDir broken;
  copy_model_with(tiny_model_dir("qwen3_moe"), broken.str(), [](const std::string&, Tensor&) { return true; });
  std::string config = read_file(broken.file("config.json"));
  const size_t at = config.find("\"qwen3_moe\"");
  ASSERT_NE(at, std::string::npos);
  config.replace(at, 11, "\"llama\"");
  write_file(broken.file("config.json"), config);
  expect_error([&] { Model::load(broken.str()); }, ErrorKind::NotImplemented, "model_type");
}

TEST(LlmModelLoading, BadLoadOptions) {
  const std::string& dir = tiny_model_dir("qwen3_moe");
  LoadOptions o;
  o.cache_dtype = DType::Float16;
  expect_error([&] { Model::load(dir, o); }, ErrorKind::Value, "cache_dtype must be float32 or bfloat16");
  o = {};
  o.max_context = -1;
  expect_error([&] { Model::load(dir, o); }, ErrorKind::Value, "max_context must be >= 0");
  o.max_context = load_model_config(dir).max_position_embeddings + 1;
  expect_error([&] { Model::load(dir, o); }, ErrorKind::Value, "exceeds the model's max_position_embeddings");
  expect_error([&] { Model::load("/nonexistent-kiln-model"); }, ErrorKind::Runtime, "nonexistent-kiln-model");
}

TEST(LlmModelLoading, WeightFormatNames) {
  for (WeightFormat f : {WeightFormat::AsStored, WeightFormat::Float32, WeightFormat::BFloat16, WeightFormat::Fp8}) {
    EXPECT_EQ(weight_format_from_name(weight_format_name(f)), f);
  }
  EXPECT_EQ(weight_format_from_name("bf16"), WeightFormat::BFloat16);
  EXPECT_EQ(weight_format_from_name("auto"), WeightFormat::AsStored);
  expect_error([] { weight_format_from_name("int4"); }, ErrorKind::Value, "unknown weight format 'int4'");
}

// Bad input to forward changes nothing: the next valid call continues the sequence.
TEST(LlmModelLoading, ForwardErrorsLeaveTheSequenceUntouched) {
  LoadOptions o;
  o.max_context = 8;
  auto model = Model::load(tiny_model_dir("lfm2_moe"), o);
  std::span<const int32_t> prompt(kPrompt);
  model->forward(prompt.first(3));
  const int64_t vocab = model->info().vocab_size;
  expect_error([&] { model->forward({}); }, ErrorKind::Value, "no tokens");
  expect_error([&] { model->forward(std::vector<int32_t>{1, static_cast<int32_t>(vocab)}); }, ErrorKind::Index,
               "outside the vocabulary");
  expect_error([&] { model->forward(std::vector<int32_t>{-1}); }, ErrorKind::Index, "token -1");
  expect_error([&] { model->forward(std::vector<int32_t>(6, 1)); }, ErrorKind::Value,
               "6 tokens at position 3 exceed the context of 8 tokens");
  EXPECT_EQ(model->position(), 3);
  Tensor continued = model->forward(prompt.subspan(3));

  auto fresh = Model::load(tiny_model_dir("lfm2_moe"), o);
  EXPECT_EQ(relative_max_difference(continued, fresh->forward(kPrompt)), 0.0);
  fresh->forward(std::vector<int32_t>{1, 2});  // exactly full
  EXPECT_EQ(fresh->position(), 8);
  expect_error([&] { fresh->forward(std::vector<int32_t>{1}); }, ErrorKind::Value, "exceed the context");
}

}  // namespace
}  // namespace kiln::llm
