// `kiln bench --filter gated_delta`: the Gated DeltaNet recurrent step for one decode
// token at Qwen3.5-35B-A3B / Qwen3-Next shapes (16 key heads, 32 value heads, dk = dv =
// 128): the float32 state [32, 128, 128] (2 MiB) read and written once, plus q, k, v and
// the gates. Calls cycle through 30 states, one per DeltaNet layer of Qwen3.5-35B-A3B, so
// each call meets its state cold as a decode step does (60 MiB in all, past the caches).
// The projections around the step are plain linear rows and are benchmarked there.
#include <fmt/core.h>

#include <cstdint>
#include <vector>

#include "cli/bench/harness.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/gated_delta.h"

namespace kiln::bench {

namespace {

constexpr double kRooflineTarget = 0.8;
constexpr int64_t kKeyHeads = 16, kValueHeads = 32, kHeadDim = 128;
constexpr int kStates = 30;

const Registrar kRegisterGatedDelta{Suite{
    "gated_delta",
    "Gated DeltaNet recurrent decode step (Qwen3.5-35B-A3B shapes, f32 state read and written once) vs the memory "
    "roofline",
    [](ThreadPool&, Table& table, bool quick) {
      Generator gen(3);
      const Tensor q = rand({1, kKeyHeads, kHeadDim}, DType::Float32, &gen);
      const Tensor k = rand({1, kKeyHeads, kHeadDim}, DType::Float32, &gen);
      const Tensor v = rand({1, kValueHeads, kHeadDim}, DType::Float32, &gen);
      const Tensor g = full({1, kValueHeads}, Scalar(-0.1), DType::Float32);
      const Tensor beta = full({1, kValueHeads}, Scalar(0.5), DType::Float32);
      std::vector<Tensor> states;
      for (int s = 0; s < kStates; ++s) states.push_back(zeros({kValueHeads, kHeadDim, kHeadDim}));
      Row row;
      row.group = "gated_delta_rule decode";
      row.shape = fmt::format("Hk {} Hv {} dk {} dv {}, f32 state", kKeyHeads, kValueHeads, kHeadDim, kHeadDim);
      row.timing = measure([&](int i) { gated_delta_rule(q, k, v, g, beta, states[static_cast<size_t>(i % kStates)]); },
                           quick ? 10 : 100, quick ? 0.05 : 0.4);
      const double state_bytes = 4.0 * kValueHeads * kHeadDim * kHeadDim;
      row.bytes = 2.0 * state_bytes + 4.0 * (2 * kKeyHeads * kHeadDim + 2 * kValueHeads * kHeadDim + 2 * kValueHeads);
      row.flops = 7.0 * kValueHeads * kHeadDim * kHeadDim;  // per state entry: two multiply-adds read, three ops update
      row.target = fmt::format(">= {:.2f} of roofline", kRooflineTarget);
      row.has_target = true;
      row.target_met = table.roofline_gbps() > 0 && table.roofline_fraction(row) >= kRooflineTarget;
      table.add(row);
    }}};

}  // namespace

}  // namespace kiln::bench
