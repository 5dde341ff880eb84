// generate(): greedy determinism, every stop reason, streaming, seeded sampling, chat
// prompts, prompt errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kiln/llm.h"
#include "llm/config.h"
#include "llm_model_test_util.h"
#include "llm_test_files.h"
#include "test_util.h"

namespace kiln::llm {
namespace {

using kiln::testing::expect_error;
using kiln::testing::TempDir;
using kiln::testing::tiny_model_dir;
using kiln::testing::write_file;

constexpr const char* kPrompt = "The quick brown fox jumps over the lazy dog";

GenerateOptions greedy(int64_t max_new_tokens) {
  GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  return o;
}

class LlmGenerate : public ::testing::TestWithParam<std::string> {};

TEST_P(LlmGenerate, GreedyIsDeterministicAndStopsAtMaxTokens) {
  auto model = Model::load(tiny_model_dir(GetParam()));
  const GenerateResult a = generate(*model, kPrompt, greedy(6));
  const GenerateResult b = generate(*model, kPrompt, greedy(6));
  ASSERT_EQ(a.stop_reason, "max_tokens");  // the synthetic model does not emit an end id here
  EXPECT_EQ(a.generated_tokens, 6);
  EXPECT_EQ(a.tokens.size(), 6u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.text, model->decode(a.tokens, /*skip_special_tokens=*/true));
  EXPECT_EQ(a.prompt_tokens, static_cast<int64_t>(model->encode(kPrompt).size()));
  EXPECT_EQ(model->position(), a.prompt_tokens + 5);  // the last token is sampled, not run

  // The first token is the argmax of the prompt's logits.
  model->reset();
  Tensor logits = model->forward(model->encode(kPrompt));
  int32_t best = 0;
  for (int32_t i = 1; i < logits.size(1); ++i) {
    if (logits.data<float>()[i] > logits.data<float>()[best]) best = i;
  }
  EXPECT_EQ(a.tokens[0], best);

  // decode_bytes sums decode_bytes_per_token over the 5 decode steps: the weights read
  // 5 times plus K/V of positions P+1 .. P+5 (arithmetic series).
  model->reset();
  const int64_t weights_only = model->decode_bytes_per_token();  // position 0: one token of K/V
  model->forward(std::vector<int32_t>{1});
  const int64_t kv = model->decode_bytes_per_token() - weights_only;
  const double p = static_cast<double>(a.prompt_tokens);
  EXPECT_DOUBLE_EQ(a.decode_bytes, 5.0 * (weights_only - kv) + kv * (5 * p + 15));

  const GenerateResult none = generate(*model, kPrompt, greedy(0));
  EXPECT_EQ(none.stop_reason, "max_tokens");
  EXPECT_EQ(none.generated_tokens, 0);
  EXPECT_EQ(none.text, "");
}

// An end-of-sequence id from config.json stops generation; it is returned in tokens
// but not in the text.
TEST_P(LlmGenerate, StopsAtEndOfSequence) {
  const std::string& dir = tiny_model_dir(GetParam());
  int32_t first;
  {
    auto model = Model::load(dir);
    first = generate(*model, kPrompt, greedy(1)).tokens.at(0);
  }
  TempDir copy;
  std::filesystem::copy(dir, copy.str(), std::filesystem::copy_options::recursive);
  ModelConfig config = load_model_config(dir);
  config.eos_token_ids = {first};
  write_file(copy.file("config.json"), model_config_to_json(config));

  auto model = Model::load(copy.str());
  EXPECT_TRUE(std::binary_search(model->eos_ids().begin(), model->eos_ids().end(), first));
  const GenerateResult r = generate(*model, kPrompt, greedy(10));
  EXPECT_EQ(r.stop_reason, "eos");
  EXPECT_EQ(r.tokens, std::vector<int32_t>{first});
  EXPECT_EQ(r.generated_tokens, 1);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.decode_bytes, 0.0);
}

TEST_P(LlmGenerate, StreamingPiecesMakeTheText) {
  auto model = Model::load(tiny_model_dir(GetParam()));
  std::vector<std::string> pieces;
  GenerateOptions o = greedy(12);
  o.on_text = [&](std::string_view piece) {
    pieces.emplace_back(piece);
    return true;
  };
  const GenerateResult r = generate(*model, kPrompt, o);
  std::string joined;
  for (const std::string& piece : pieces) {
    EXPECT_FALSE(piece.empty());
    joined += piece;
  }
  EXPECT_EQ(joined, r.text);
  EXPECT_FALSE(r.text.empty());

  // Returning false stops right after that piece.
  int calls = 0;
  o.on_text = [&](std::string_view) { return ++calls < 2; };
  const GenerateResult stopped = generate(*model, kPrompt, o);
  EXPECT_EQ(stopped.stop_reason, "callback");
  EXPECT_EQ(calls, 2);
  EXPECT_LT(stopped.generated_tokens, 12);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + stopped.generated_tokens));
}

TEST_P(LlmGenerate, StopsWhenTheContextIsFull) {
  const std::string& dir = tiny_model_dir(GetParam());
  LoadOptions o;
  auto probe = Model::load(dir);
  const int64_t prompt_len = static_cast<int64_t>(probe->encode(kPrompt).size());
  o.max_context = prompt_len + 2;
  auto model = Model::load(dir, o);
  const GenerateResult r = generate(*model, kPrompt, greedy(10));
  // Prefill fills P positions; tokens 1 and 2 are run at P and P+1; token 3 is sampled
  // from the last logits with no room left to run it.
  EXPECT_EQ(r.stop_reason, "context_full");
  EXPECT_EQ(r.generated_tokens, 3);
  EXPECT_EQ(model->position(), model->max_context());

  o.max_context = prompt_len - 1;
  auto small = Model::load(dir, o);
  expect_error([&] { generate(*small, kPrompt, greedy(1)); }, ErrorKind::Value, "the context holds");
}

TEST_P(LlmGenerate, SeededSamplingIsReproducible) {
  auto model = Model::load(tiny_model_dir(GetParam()));
  GenerateOptions o = greedy(8);
  o.sampling.temperature = 1.0;
  o.sampling.top_p = 0.95;
  o.sampling.seed = 11;
  const GenerateResult a = generate(*model, kPrompt, o);
  const GenerateResult b = generate(*model, kPrompt, o);
  EXPECT_EQ(a.tokens, b.tokens);
  // A hot enough temperature that the draws of two seeds differ (the tied LFM2 logits
  // of the synthetic model span tens of units).
  o.sampling.temperature = 10.0;
  o.sampling.top_p = 1.0;
  const GenerateResult hot = generate(*model, kPrompt, o);
  EXPECT_EQ(generate(*model, kPrompt, o).tokens, hot.tokens);
  o.sampling.seed = 12;
  EXPECT_NE(generate(*model, kPrompt, o).tokens, hot.tokens);
  o.sampling.top_p = 0.0;
  expect_error([&] { generate(*model, kPrompt, o); }, ErrorKind::Value, "top_p");
}

TEST_P(LlmGenerate, ChatPromptUsesTheTemplate) {
  auto model = Model::load(tiny_model_dir(GetParam()));
  GenerateOptions o = greedy(2);
  o.chat = true;
  o.system = "Be brief.";
  const GenerateResult r = generate(*model, "Hello", o);
  EXPECT_EQ(r.prompt_tokens,
            static_cast<int64_t>(model->encode(model->chat_prompt("Hello", "Be brief."), false).size()));
  EXPECT_EQ(r.generated_tokens, 2);
}

// Prompts past 512 tokens prefill in several forward passes; the first token is still
// the argmax of one pass over the whole prompt.
TEST(LlmGenerateLong, LongPromptPrefillsInChunks) {
  auto model = Model::load(tiny_model_dir("lfm2_moe"));
  std::string prompt;
  while (model->encode(prompt).size() < 700) prompt += "the lazy dog sleeps in the sun, ";
  const GenerateResult r = generate(*model, prompt, greedy(1));
  EXPECT_GT(r.prompt_tokens, 512);
  model->reset();
  Tensor logits = model->forward(model->encode(prompt));
  int32_t best = 0;
  for (int32_t i = 1; i < logits.size(1); ++i) {
    if (logits.data<float>()[i] > logits.data<float>()[best]) best = i;
  }
  EXPECT_EQ(r.tokens.at(0), best);
}

TEST(LlmGenerateErrors, BadPrompts) {
  auto model = Model::load(tiny_model_dir("qwen3_moe"));  // Qwen adds no BOS
  expect_error([&] { generate(*model, "", greedy(1)); }, ErrorKind::Value, "no tokens");
  expect_error([&] { generate(*model, kPrompt, greedy(-1)); }, ErrorKind::Value, "max_new_tokens");
}

INSTANTIATE_TEST_SUITE_P(Families, LlmGenerate, ::testing::Values("qwen3_moe", "lfm2_moe"));

}  // namespace
}  // namespace kiln::llm
