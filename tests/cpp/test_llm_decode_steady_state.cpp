// Decode with the fused blocks (kiln/ops/decode_block.h) against the unfused ops, end to
// end, and what one decode token costs besides its kernels, measured with the
// allocator's statistics.
//   - Every architecture, bf16 as stored, FP8 checkpoints and FP8 quantised at load: the
//     logits of every decode step are bit-identical with and without the fused blocks.
//   - After a few warm-up tokens a decode step takes no new memory from the system (every
//     block it needs is in the caching allocator), and the fused path (the fused blocks
//     and the decode steps, llm/decode_steps.h) takes nothing from the allocator at all:
//     0 allocations per token for every family, bf16 and FP8.
//   - Logits the caller still holds are never overwritten by later tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/llm.h"
#include "llm_model_test_util.h"

namespace {

using namespace kiln;
using kiln::llm::LoadOptions;
using kiln::llm::Model;
using kiln::llm::WeightFormat;

struct DecodeRun {
  std::vector<std::vector<float>> logits;  // per decode step
  double system_per_token = 0;             // blocks the allocator had to get from the system
  double cached_per_token = 0;             // blocks served from its cache
};

DecodeRun decode(const std::string& dir, LoadOptions options) {
  auto model = Model::load(dir, options);
  DecodeRun run;
  model->forward(std::vector<int32_t>{3, 14, 15, 92});
  const auto step = [&](int32_t token) {
    const Tensor logits = model->forward(std::vector<int32_t>{token});
    const float* p = logits.data<float>();
    run.logits.emplace_back(p, p + logits.numel());
  };
  for (int32_t t = 0; t < 4; ++t) step(20 + t);  // warm-up: scratch and caches grow here
  constexpr int kTokens = 12;
  const AllocatorStats before = allocator_stats();
  for (int32_t t = 0; t < kTokens; ++t) step(40 + 3 * t);
  const AllocatorStats after = allocator_stats();
  const int64_t allocs = after.num_allocs - before.num_allocs;
  const int64_t hits = after.num_cache_hits - before.num_cache_hits;
  run.system_per_token = static_cast<double>(allocs - hits) / kTokens;
  run.cached_per_token = static_cast<double>(hits) / kTokens;
  return run;
}

void compare(const std::string& arch, bool fp8_checkpoint, WeightFormat format) {
  const std::string dir = kiln::testing::tiny_model_dir(arch, fp8_checkpoint);
  LoadOptions options;
  options.weights = format;
  const DecodeRun fused = decode(dir, options);
  options.fused_decode = false;
  const DecodeRun unfused = decode(dir, options);
  const std::string what = arch + (fp8_checkpoint ? " (FP8 checkpoint)" : "") +
                           (format == WeightFormat::Fp8 ? " (FP8 at load)" : "");
  ASSERT_EQ(fused.logits.size(), unfused.logits.size());
  for (size_t i = 0; i < fused.logits.size(); ++i) {
    ASSERT_EQ(fused.logits[i].size(), unfused.logits[i].size());
    ASSERT_EQ(std::memcmp(fused.logits[i].data(), unfused.logits[i].data(), fused.logits[i].size() * sizeof(float)), 0)
        << what << ": decode step " << i << " differs with the fused blocks";
  }
  EXPECT_EQ(fused.system_per_token, 0.0) << what;
  EXPECT_EQ(unfused.system_per_token, 0.0) << what;
  EXPECT_LT(fused.cached_per_token, unfused.cached_per_token) << what;
  // The fused path takes nothing from the allocator: a regression that puts an
  // allocation back into a steady-state token fails here.
  EXPECT_EQ(fused.cached_per_token, 0.0) << what << ": allocations per fused decode token";
  std::printf("%s: %.1f allocations per decode token fused, %.1f unfused\n", what.c_str(), fused.cached_per_token,
              unfused.cached_per_token);
}

TEST(LlmDecodeSteadyState, LogitsTheCallerHoldsStayIntact) {
  // The decode path writes logits into buffers it reuses only once the caller has let go
  // of them: logits kept across several tokens (generate keeps one, this keeps all) stay
  // what they were.
  for (const char* arch : {"qwen3_moe", "lfm2_moe"}) {
    auto model = Model::load(kiln::testing::tiny_model_dir(arch, false), LoadOptions{});
    model->forward(std::vector<int32_t>{3, 14, 15});
    std::vector<Tensor> held;
    std::vector<std::vector<float>> copies;
    for (int32_t t = 0; t < 5; ++t) {
      held.push_back(model->forward(std::vector<int32_t>{30 + t}));
      const float* p = held.back().data<float>();
      copies.emplace_back(p, p + held.back().numel());
    }
    for (size_t i = 0; i < held.size(); ++i) {
      EXPECT_EQ(std::memcmp(held[i].data<float>(), copies[i].data(), copies[i].size() * sizeof(float)), 0)
          << arch << ": the logits of step " << i << " changed under the caller";
    }
  }
}

TEST(LlmDecodeSteadyState, FusedDecodeMatchesUnfusedOpsAndAllocatesNothing) {
  for (const char* arch : {"qwen3_moe", "lfm2_moe", "qwen3", "qwen3_next", "qwen3_5_moe"}) {
    compare(arch, false, WeightFormat::AsStored);
  }
}

TEST(LlmDecodeSteadyState, Fp8CheckpointsAndFp8AtLoad) {
  for (const char* arch : {"qwen3_moe", "lfm2_moe", "qwen3_next"}) {
    compare(arch, true, WeightFormat::AsStored);
    compare(arch, false, WeightFormat::Fp8);
  }
}

}  // namespace
