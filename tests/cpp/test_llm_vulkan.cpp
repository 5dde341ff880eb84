// The LLM runtime on the Vulkan device against the same model on the CPU: the tiny dense
// Qwen3 checkpoint's logits (prompt, decode steps, a continued prompt) in float32,
// bfloat16 and FP8 weights, greedy generation token for token, the KV cache written on
// the device, one host wait per decode step; the MoE families and the Gated DeltaNet
// hybrids against the CPU; families whose ops the device lacks fail the load with
// NotImplemented naming the op.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bf16_dot_mode.h"
#include "kiln/cpu_features.h"
#include "kiln/llm.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "llm/device_placement.h"
#include "llm/kv_cache.h"
#include "llm_model_test_util.h"
#include "test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using testing::relative_max_difference;
using testing::tiny_model_dir;
using LlmVulkan = testing::VulkanTest;

constexpr double kEps32 = std::numeric_limits<float>::epsilon();

std::unique_ptr<llm::Model> load(const std::string& arch, Device device, llm::WeightFormat weights,
                                 std::optional<DType> cache = std::nullopt) {
  llm::LoadOptions o;
  o.weights = weights;
  o.cache_dtype = cache;
  o.max_context = 64;
  o.device = device;
  return llm::Model::load(tiny_model_dir(arch), o);
}

// Logits of the same sequence on both models: a prompt (every position), three decode
// steps, then a prompt continuing the sequence (an explicit mask on the device).
std::vector<std::pair<Tensor, Tensor>> run_both(llm::Model& cpu, llm::Model& dev) {
  std::vector<std::pair<Tensor, Tensor>> out;
  const std::vector<std::vector<int32_t>> steps = {{5, 17, 300, 2, 99, 41, 7}, {12}, {480}, {3}, {8, 250, 77}};
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool all = steps[i].size() > 1;
    out.emplace_back(dev.forward(steps[i], all), cpu.forward(steps[i], all));
  }
  return out;
}

// Float32 weights and cache: both sides compute in float32 and differ only in the order
// of sums (linear over K <= 128, the tiny preset's widest reduction; attention over at
// most 64 keys of dim 16) and in Vulkan's exp/rsqrt/division (a few ulp). A sum of K
// products moves by at most 2 K eps of the sum of their magnitudes between two orders;
// through 3 layers and the head that stays under 2 (2 K + 16) eps (layers + 1) of the
// largest logit.
TEST_F(LlmVulkan, DenseQwen3LogitsMatchCpuInFloat32) {
  const auto cpu = load("qwen3", kCPU, llm::WeightFormat::Float32, DType::Float32);
  const auto dev = load("qwen3", kVulkan, llm::WeightFormat::Float32, DType::Float32);
  EXPECT_EQ(dev->info().device, kVulkan);
  const double bound = 2 * (2 * 128 + 16) * kEps32 * (3 + 1);
  for (const auto& [got, expected] : run_both(*cpu, *dev)) {
    EXPECT_EQ(got.device(), kCPU);  // logits come back for the sampler
    EXPECT_LE(relative_max_difference(got, expected), bound);
  }
}

// The device's FP8 decode kernels multiply float32 activations, so FP8 models compare
// with the CPU's float32 path (bf16 dot mode 0): the CPU's bf16 dot path rounds the FP8
// kernels' float32 inputs (the fused blocks' normed hidden state, the SwiGLU activations)
// to bfloat16 first, and a routing decision that flips on that moves the logits more than
// the bounds below allow. Other formats keep the default (-1: KILN_BF16_DOT).
int fp8_cpu_path(llm::WeightFormat format) { return format == llm::WeightFormat::Fp8 ? 0 : -1; }

// bfloat16 / FP8 weights: activations are rounded to bfloat16 before each linear (and the
// cache is bfloat16), so a float32 difference that crosses a rounding boundary moves an
// activation by one bfloat16 unit (2^-8 relative); a few such flips per layer keep the
// logits within a few units of 2^-8 of the largest. FP8 prompts on a CPU with the bf16
// dot path (kiln/cpu_features.h) also round the activations of every many-row FP8 linear
// and expert to bfloat16 (up to 2^-8 relative), where the device keeps float32: one more
// unit of 2^-8 in the RMS bound (a Zen 4 build measured 1.13 x 2^-8).
double fp8_prompt_rounding(llm::WeightFormat format) {
  return format == llm::WeightFormat::Fp8 && bf16_dot_enabled() ? std::ldexp(1.0, -8) : 0.0;
}

TEST_F(LlmVulkan, DenseQwen3LogitsMatchCpuInNarrowWeights) {
  for (llm::WeightFormat format : {llm::WeightFormat::AsStored, llm::WeightFormat::Fp8}) {
    SCOPED_TRACE(std::string(llm::weight_format_name(format)));
    const bf16_dot_test::Bf16DotMode cpu_path(fp8_cpu_path(format));
    const auto cpu = load("qwen3", kCPU, format);
    const auto dev = load("qwen3", kVulkan, format);
    EXPECT_EQ(dev->info().cache_dtype, DType::BFloat16);
    for (const auto& [got, expected] : run_both(*cpu, *dev)) {
      EXPECT_LE(relative_max_difference(got, expected), 4 * std::ldexp(1.0, -8) + 4 * fp8_prompt_rounding(format));
      EXPECT_LE(testing::relative_rms_difference(got, expected), std::ldexp(1.0, -8) + fp8_prompt_rounding(format));
    }
  }
}

TEST_F(LlmVulkan, GreedyGenerationGivesTheCpuTokens) {
  for (llm::WeightFormat format : {llm::WeightFormat::Float32, llm::WeightFormat::AsStored}) {
    SCOPED_TRACE(std::string(llm::weight_format_name(format)));
    const auto cpu = load("qwen3", kCPU, format);
    const auto dev = load("qwen3", kVulkan, format);
    llm::GenerateOptions g;
    g.max_new_tokens = 24;
    const llm::GenerateResult a = llm::generate(*cpu, "The kiln was", g);
    const llm::GenerateResult b = llm::generate(*dev, "The kiln was", g);
    EXPECT_EQ(b.tokens, a.tokens);
    EXPECT_EQ(b.text, a.text);
  }
}

TEST_F(LlmVulkan, DecodeStepWaitsOnceForTheLogits) {
  const auto dev = load("qwen3", kVulkan, llm::WeightFormat::AsStored);
  dev->forward(std::vector<int32_t>{1, 2, 3});
  for (int step = 0; step < 3; ++step) {
    const VulkanQueueStats before = vulkan_queue_stats();
    dev->forward(std::vector<int32_t>{4});
    const VulkanQueueStats after = vulkan_queue_stats();
    EXPECT_EQ(after.waits - before.waits, 1);  // the logits download, nothing else
    const int64_t commands = after.commands - before.commands;
    EXPECT_GT(commands, 0);
    // Batched: a submit per batch_size commands, plus the one the download forces.
    EXPECT_LE(after.submits - before.submits, commands / before.batch_size + 2);
  }
}

TEST_F(LlmVulkan, KvCacheLivesAndIsWrittenOnTheDevice) {
  const std::vector<llm::MixerKind> mixers = {llm::MixerKind::Attention, llm::MixerKind::ShortConv};
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    llm::KvCache cpu(mixers, 2, 16, 3, 8, 10, dt);
    llm::KvCache dev(mixers, 2, 16, 3, 8, 10, dt, {}, kVulkan);
    EXPECT_EQ(dev.keys(0).device(), kVulkan);
    EXPECT_EQ(dev.conv_state(1).device(), kVulkan);
    EXPECT_EQ(amax(abs(dev.conv_state(1).to(kCPU))).item().to_double(), 0.0);
    // [T, kv_heads, head_dim] float32 rows at positions 3..6, cast to the cache dtype.
    const Tensor k = randn({4, 2, 16}), v = randn({4, 2, 16});
    cpu.write(0, 3, k, v);
    dev.write(0, 3, k.to(kVulkan), v.to(kVulkan));
    testing::expect_same_bits(dev.keys(0).narrow(2, 3, 4), cpu.keys(0).narrow(2, 3, 4));
    testing::expect_same_bits(dev.values(0).narrow(2, 3, 4), cpu.values(0).narrow(2, 3, 4));
  }
}

// LFM2's short-conv mixer (cat, products, the rolling state) runs on the device with the
// ops it already has: a prompt then decode steps against the CPU block, float32 weights
// (the same float32 ops on both sides: exact but for products' fused rounding).
TEST_F(LlmVulkan, ShortConvBlockMatchesCpu) {
  const int64_t H = 24, taps = 3;
  llm::ShortConvBlock cpu_block{llm::Linear(randn({3 * H, H}), std::nullopt), llm::Linear(randn({H, H}), std::nullopt),
                                randn({taps, H}), H};
  llm::ShortConvBlock dev_block{llm::Linear(cpu_block.in_proj.weight.to(kVulkan), std::nullopt),
                                llm::Linear(cpu_block.out_proj.weight.to(kVulkan), std::nullopt),
                                cpu_block.kernel.to(kVulkan), H};
  const std::vector<llm::MixerKind> mixers = {llm::MixerKind::ShortConv};
  llm::KvCache cpu_cache(mixers, 1, 2, taps, H, 16, DType::Float32);
  llm::KvCache dev_cache(mixers, 1, 2, taps, H, 16, DType::Float32, {}, kVulkan);
  for (int64_t count : {5, 1, 1, 2}) {
    const Tensor h = randn({count, H});
    const Tensor expected = cpu_block.forward(h, cpu_cache, 0);
    const Tensor got = dev_block.forward(h.to(kVulkan), dev_cache, 0);
    EXPECT_EQ(got.device(), kVulkan);
    // Linear sums of H = 24 products (in_proj, out_proj) in another order: 2 H eps of
    // the magnitudes, which randn keeps within ~5 H per sum; then the conv's 3 taps.
    EXPECT_LE(relative_max_difference(got.to(kCPU), expected), 2 * 2 * H * kEps32 * 8);
    EXPECT_LE(relative_max_difference(dev_cache.conv_state(0).to(kCPU), cpu_cache.conv_state(0)), 2 * H * kEps32 * 4);
  }
}

// Weights that view one allocation (a MoE layer's packed experts, a tied lm_head) stay
// views of one device allocation, with the same bytes.
TEST_F(LlmVulkan, WeightsGoUpOnceKeepingSharedAllocations) {
  const int64_t E = 4, I = 8, H = 16, V = 32;
  const Tensor gate = randn({E, I, H}).to(DType::BFloat16), up = randn({E, I, H}).to(DType::BFloat16);
  const Tensor down = randn({E, H, I}).to(DType::BFloat16);
  llm::DecoderWeights w;
  w.embedding = randn({V, H});
  w.final_norm = randn({H});
  w.lm_head = llm::Linear(w.embedding, std::nullopt);
  llm::DecoderLayer layer;
  layer.mixer_norm = randn({H});
  layer.ffn_norm = randn({H});
  llm::MoeBlock moe;
  moe.router = llm::Linear(randn({E, H}), std::nullopt);
  for (int64_t e = 0; e < E; ++e) moe.experts.experts.push_back({gate.select(0, e), up.select(0, e), down.select(0, e)});
  layer.moe = moe;
  w.layers.push_back(layer);
  // Experts as separate tensors (an as-stored checkpoint's per-expert matrices): stacked
  // into one tensor per projection on the way up.
  for (int64_t e = 0; e < E; ++e) {
    layer.moe->experts.experts[e] = {randn({I, H}), randn({I, H}), randn({H, I}), randn({I}), randn({I}), randn({H})};
  }
  w.layers.push_back(layer);
  const llm::DecoderWeights before = w;
  llm::move_weights_to_device(w, kVulkan);
  EXPECT_EQ(w.lm_head.weight.storage(), w.embedding.storage());
  const auto& experts = w.layers[0].moe->experts.experts;
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_EQ(experts[e].gate.storage(), experts[0].gate.storage());
    EXPECT_EQ(experts[e].down.storage(), experts[0].down.storage());
    EXPECT_EQ(experts[e].up.device(), kVulkan);
    testing::expect_same_bits(experts[e].gate, before.layers[0].moe->experts.experts[e].gate);
    testing::expect_same_bits(experts[e].down, before.layers[0].moe->experts.experts[e].down);
  }
  EXPECT_NE(experts[0].gate.storage(), experts[0].up.storage());  // separate allocations stay separate
  const auto& separate = w.layers[1].moe->experts.experts;
  const auto& separate_before = before.layers[1].moe->experts.experts;
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_EQ(separate[e].up.storage(), separate[0].up.storage());
    EXPECT_EQ(separate[e].down_scale->storage(), separate[0].down_scale->storage());
    EXPECT_EQ(separate[e].gate.storage_offset() - separate[0].gate.storage_offset(), e * I * H);
    testing::expect_same_bits(separate[e].up, separate_before[e].up);
    testing::expect_same_bits(*separate[e].gate_scale, *separate_before[e].gate_scale);
  }
  testing::expect_same_bits(w.layers[0].moe->router.weight, before.layers[0].moe->router.weight);
  testing::expect_same_bits(w.embedding, before.embedding);
  EXPECT_EQ(w.final_norm.device(), kVulkan);
  EXPECT_EQ(w.layers[0].mixer_norm.device(), kVulkan);
}

// Until the device has every kernel a family needs, loading it there is a NotImplemented
// error naming the missing op; once it has them, the logits must match the CPU's.
TEST_F(LlmVulkan, MoeFamiliesMatchCpu) {
  for (const char* arch : {"qwen3_moe", "lfm2_moe"}) {
    SCOPED_TRACE(arch);
    const auto dev = load(arch, kVulkan, llm::WeightFormat::Float32, DType::Float32);
    const auto cpu = load(arch, kCPU, llm::WeightFormat::Float32, DType::Float32);
    for (const auto& [got, expected] : run_both(*cpu, *dev)) {
      EXPECT_LE(relative_max_difference(got, expected), 1e-4);
    }
  }
}

// The Gated DeltaNet hybrids on the device (the recurrent gated delta rule for prompts
// and steps, the gated norm, gated attention with partial RoPE, the MoE with a sigmoid-
// gated shared expert) against the CPU, whose prompts take the chunked form. Float32
// weights and cache: the dense bound above with the tiny hybrid's widest reduction (K =
// 96, the dense FFN's intermediate size) over 4 layers, plus the recurrence's own
// float32 error (gated_delta_reference.h: 4 T (dk + dv + 8) u of the largest output for
// T tokens, dk = dv = 16) for the 13 tokens of run_both; both relative to the largest
// logit. Also: greedy tokens equal, one host wait per decode step.
TEST_F(LlmVulkan, HybridFamiliesMatchCpu) {
  constexpr int64_t kWidest = 96, kLayers = 4, kTokens = 13, kKeyDim = 16, kValueDim = 16;
  const double bound = 2 * (2 * kWidest + 16) * kEps32 * (kLayers + 1) +
                       4.0 * kTokens * (kKeyDim + kValueDim + 8) * (kEps32 / 2);
  for (const char* arch : {"qwen3_next", "qwen3_5_moe"}) {
    SCOPED_TRACE(arch);
    const auto dev = load(arch, kVulkan, llm::WeightFormat::Float32, DType::Float32);
    const auto cpu = load(arch, kCPU, llm::WeightFormat::Float32, DType::Float32);
    EXPECT_EQ(dev->info().device, kVulkan);
    for (const auto& [got, expected] : run_both(*cpu, *dev)) {
      EXPECT_EQ(got.device(), kCPU);
      EXPECT_LE(relative_max_difference(got, expected), bound);
    }
    dev->reset();
    cpu->reset();
    llm::GenerateOptions g;
    g.max_new_tokens = 12;
    const llm::GenerateResult a = llm::generate(*cpu, "The kiln was", g);
    const llm::GenerateResult b = llm::generate(*dev, "The kiln was", g);
    EXPECT_EQ(b.tokens, a.tokens);
    dev->reset();
    dev->forward(std::vector<int32_t>{1, 2, 3});
    for (int step = 0; step < 2; ++step) {
      const VulkanQueueStats before = vulkan_queue_stats();
      dev->forward(std::vector<int32_t>{4});
      EXPECT_EQ(vulkan_queue_stats().waits - before.waits, 1);  // the logits download, nothing else
    }
  }
}

// Narrow weights on the hybrids: the dense model's narrow-weight reasoning, doubled. The
// hybrids have more bfloat16 rounding points per layer (the DeltaNet mixer's projections
// and gated norm next to attention and the MoE), and the CPU's prompt runs the chunked
// form while the device runs the recurrent one, so their float32 values differ before
// each rounding more often (a clang build measured 1.1 x 2^-8 RMS).
TEST_F(LlmVulkan, HybridFamiliesMatchCpuInNarrowWeights) {
  for (const char* arch : {"qwen3_next", "qwen3_5_moe"}) {
    for (llm::WeightFormat format : {llm::WeightFormat::AsStored, llm::WeightFormat::Fp8}) {
      SCOPED_TRACE(std::string(arch) + " " + std::string(llm::weight_format_name(format)));
      const bf16_dot_test::Bf16DotMode cpu_path(fp8_cpu_path(format));
      const auto cpu = load(arch, kCPU, format);
      const auto dev = load(arch, kVulkan, format);
      for (const auto& [got, expected] : run_both(*cpu, *dev)) {
        EXPECT_LE(relative_max_difference(got, expected), 8 * std::ldexp(1.0, -8) + 4 * fp8_prompt_rounding(format));
        EXPECT_LE(testing::relative_rms_difference(got, expected),
                  2 * std::ldexp(1.0, -8) + fp8_prompt_rounding(format));
      }
    }
  }
}

}  // namespace
}  // namespace kiln
