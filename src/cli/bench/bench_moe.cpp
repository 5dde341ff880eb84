// `kiln bench --filter moe`: the fused MoE expert block for one decode token.
//   Qwen3-30B-A3B   8 of 128 experts, hidden 2048, intermediate 768
//   Qwen3.5-35B-A3B 8 of 256 experts + the shared expert (sigmoid-gated), hidden 2048,
//                   intermediate 512
// each with bf16 experts and FP8 experts (row-wise scales). Bytes = the expert weights
// the token touches (+ FP8 scales, + the shared expert and its gate), against this run's
// memory roofline; the bf16 Qwen3-30B row also against PyTorch's per-expert loop.
// Every call reads cold weights: calls cycle through disjoint sets of 8 experts covering
// all of them (1.2-1.6 GB in bf16), and through 16 copies of the shared expert.
#include <fmt/core.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cli/bench/harness.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/moe.h"

namespace kiln::bench {

namespace {

constexpr double kRooflineTarget = 0.75;
// PyTorch 1.13 CPU's per-expert loop for one token through 8 of 128 experts (H 2048,
// I 768, bf16) on this machine class, as the issue gives it.
constexpr double kTorchExpertLoopS = 5.6e-3;
constexpr int64_t kHidden = 2048;
constexpr int64_t kTopK = 8;
constexpr int kSharedCopies = 16;

struct Shape3 {
  const char* model;
  int64_t experts;
  int64_t inter;
  bool shared;
};

// Uniform values of magnitude ~1/sqrt(fan_in) (timing does not depend on them).
Tensor random_weights(const Shape& shape, int64_t fan_in, DType dt, uint64_t seed) {
  Generator g(seed);
  return mul(sub(rand(shape, DType::Float32, &g), Scalar(0.5)), Scalar(2.0 / std::sqrt(double(fan_in)))).to(dt);
}

// Experts as views of fused [E, 2I, H] / [E, H, I] tensors, in bf16 or FP8 (row scales).
MoeExperts make_experts(const Shape3& s, bool fp8) {
  const Tensor gate_up = random_weights({s.experts, 2 * s.inter, kHidden}, kHidden, DType::BFloat16, 1);
  const Tensor down = random_weights({s.experts, kHidden, s.inter}, s.inter, DType::BFloat16, 2);
  if (!fp8) return MoeExperts::from_fused(gate_up, down);
  const auto [q_gu, s_gu] = quantize_fp8_rowwise(gate_up.view({s.experts * 2 * s.inter, kHidden}));
  const auto [q_d, s_d] = quantize_fp8_rowwise(down.view({s.experts * kHidden, s.inter}));
  return MoeExperts::from_fused(q_gu.view({s.experts, 2 * s.inter, kHidden}), q_d.view({s.experts, kHidden, s.inter}),
                                s_gu.view({s.experts, 2 * s.inter}), s_d.view({s.experts, kHidden}));
}

std::vector<SharedExpert> make_shared(const Shape3& s, bool fp8) {
  std::vector<SharedExpert> copies;
  for (int c = 0; c < kSharedCopies; ++c) {
    MoeExperts one = make_experts({s.model, 1, s.inter, false}, fp8);
    copies.push_back({one.experts[0], random_weights({1, kHidden}, kHidden, DType::BFloat16, 100 + c)});
  }
  return copies;
}

void run_shape(Table& table, const Shape3& s, bool fp8, bool quick) {
  const MoeExperts experts = make_experts(s, fp8);
  const std::vector<SharedExpert> shared = s.shared ? make_shared(s, fp8) : std::vector<SharedExpert>{};
  const Tensor x = random_weights({1, kHidden}, 1, DType::BFloat16, 7);
  // Call i uses experts p, p + P, p + 2P, ... (p = i mod P, P = E / 8): disjoint sets.
  const int64_t patterns = s.experts / kTopK;
  std::vector<Tensor> ids;
  for (int64_t p = 0; p < patterns; ++p) {
    Tensor id = empty({1, kTopK}, DType::Int32);
    for (int64_t j = 0; j < kTopK; ++j) id.data<int32_t>()[j] = static_cast<int32_t>(p + j * patterns);
    ids.push_back(id);
  }
  const Tensor weights = full({1, kTopK}, Scalar(1.0 / kTopK), DType::Float32);
  const double item = fp8 ? 1.0 : 2.0;
  const double per_expert = 3.0 * s.inter * kHidden * item + (fp8 ? (2.0 * s.inter + kHidden) * 4.0 : 0.0);

  Row row;
  row.group = fmt::format("moe_experts decode {}", fp8 ? "fp8 (row scales)" : "bf16");
  row.shape = fmt::format("{}: {} of {}{}, H {} I {}", s.model, kTopK, s.experts, s.shared ? " + shared" : "", kHidden,
                          s.inter);
  row.timing = measure(
      [&](int i) {
        const Tensor& id = ids[static_cast<size_t>(i % patterns)];
        if (s.shared) {
          moe_experts(x, weights, id, experts, shared[static_cast<size_t>(i % kSharedCopies)]);
        } else {
          moe_experts(x, weights, id, experts);
        }
      },
      quick ? 5 : 60, quick ? 0.05 : 0.4);
  row.bytes = kTopK * per_expert + (s.shared ? per_expert + kHidden * 2.0 : 0.0);
  row.flops = 2.0 * row.bytes / item;
  if (!fp8 && !s.shared) {
    row.baseline_s = kTorchExpertLoopS;
    row.baseline_label = "PyTorch 1.13 per-expert loop";
  }
  row.target = fmt::format(">= {:.2f} of roofline", kRooflineTarget);
  row.has_target = true;
  row.target_met = table.roofline_gbps() > 0 && table.roofline_fraction(row) >= kRooflineTarget;
  table.add(row);
}

const Registrar kRegisterMoe{Suite{
    "moe",
    "fused MoE expert block, one decode token: Qwen3-30B-A3B (8/128, I 768) and Qwen3.5-35B-A3B (8/256 + shared, "
    "I 512), bf16 and FP8, vs the memory roofline",
    [](ThreadPool&, Table& table, bool quick) {
      fmt::print("moe: bytes = expert weights one token touches (+ scales, + shared expert)\n");
      for (const Shape3& s : {Shape3{"Qwen3-30B-A3B", 128, 768, false}, Shape3{"Qwen3.5-35B-A3B", 256, 512, true}}) {
        for (bool fp8 : {false, true}) run_shape(table, s, fp8, quick);
      }
    }}};

}  // namespace

}  // namespace kiln::bench
