// `kiln bench --filter gated_delta`: the Gated DeltaNet recurrent step for one decode
// token at Qwen3.5-35B-A3B / Qwen3-Next shapes (16 key heads, 32 value heads, dk = dv =
// 128): the float32 state [32, 128, 128] (2 MiB) read and written once, plus q, k, v and
// the gates. Calls cycle through 30 states, one per DeltaNet layer of Qwen3.5-35B-A3B, or
// more where 30 would not span four times the last-level cache, so each call meets its
// state cold as a decode step does (in the model a whole token of weights passes between
// two uses of one state; 60 MiB of states alone left some of them in a 32 MiB L3).
// The projections around the step are plain linear rows and are benchmarked there.
// A second row runs the fused decode step (delta_net_decode_out) at the same shapes, and a
// third the chunked WY prefill (gated_delta_rule_chunked) over a 512-token
// prompt at the same shapes, against the compute peak measured in the same run.
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cli/bench/harness.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/runtime.h"

namespace kiln::bench {

namespace {

constexpr double kRooflineTarget = 0.8;
constexpr int64_t kKeyHeads = 16, kValueHeads = 32, kHeadDim = 128;
constexpr int kLayerStates = 30;

// States the calls cycle through: one per DeltaNet layer, at least four last-level
// caches' worth.
int state_count() {
  const int64_t state_bytes = kValueHeads * kHeadDim * kHeadDim * static_cast<int64_t>(sizeof(float));
  const int64_t for_cache = (4 * cpu_info().llc_bytes + state_bytes - 1) / state_bytes;
  return static_cast<int>(std::clamp<int64_t>(for_cache, kLayerStates, 512));
}
constexpr double kPrefillPeakTarget = 0.5;
constexpr int64_t kPrefillTokens = 512, kChunk = 64;

// Floating-point operations of one chunked prefill (the kernel's matrix-shaped work; the
// norms and gates are lower order): per chunk of C tokens and value head, the system
// C^2/2 dot products of dk, the solve C^2/2 (dv + dk) multiply-adds, the intra-chunk
// scores and their product C^2/2 (dk + dv), and per token three dk x dv products
// (the state read for W and q, and the state update).
double chunked_prefill_flops(int64_t tokens, int64_t heads, int64_t dk, int64_t dv) {
  const double C = kChunk, per_token = C * (3.0 * dk + 2.0 * dv) + 6.0 * dk * dv;
  return per_token * static_cast<double>(tokens) * static_cast<double>(heads);
}

void add_chunked_prefill_row(Table& table, bool quick) {
  Generator gen(4);
  const Tensor q = rand({kPrefillTokens, kKeyHeads, kHeadDim}, DType::Float32, &gen);
  const Tensor k = rand({kPrefillTokens, kKeyHeads, kHeadDim}, DType::Float32, &gen);
  const Tensor v = rand({kPrefillTokens, kValueHeads, kHeadDim}, DType::Float32, &gen);
  const Tensor g = full({kPrefillTokens, kValueHeads}, Scalar(-0.1), DType::Float32);
  const Tensor beta = full({kPrefillTokens, kValueHeads}, Scalar(0.5), DType::Float32);
  Tensor state = zeros({kValueHeads, kHeadDim, kHeadDim});
  Row row;
  row.group = "gated_delta_rule_chunked prefill";
  row.shape = fmt::format("{} tokens, Hk {} Hv {} dk {} dv {}, chunk {}", kPrefillTokens, kKeyHeads, kValueHeads,
                          kHeadDim, kHeadDim, kChunk);
  row.timing = measure([&](int) { gated_delta_rule_chunked(q, k, v, g, beta, state); }, quick ? 2 : 10,
                       quick ? 0.05 : 0.4);
  row.flops = chunked_prefill_flops(kPrefillTokens, kValueHeads, kHeadDim, kHeadDim);
  row.target = fmt::format(">= {:.2f} of peak", kPrefillPeakTarget);
  row.has_target = true;
  row.target_met =
      table.peak_gflops() > 0 && row.flops / row.timing.median_s / 1e9 >= kPrefillPeakTarget * table.peak_gflops();
  table.add(row);
}

// The fused decode step (delta_net_decode_out: conv, gates, rule and gated norm of one
// token) at the same shapes, its states cycling like the rule's. Its traffic is the rule's
// plus the conv's weights and history and the few rows around it.
void add_fused_decode_row(Table& table, bool quick) {
  constexpr int64_t kKernel = 4;
  const int64_t channels = 2 * kKeyHeads * kHeadDim + kValueHeads * kHeadDim;
  Generator gen(5);
  const Tensor qkv = rand({1, channels}, DType::Float32, &gen);
  const Tensor z = rand({1, kValueHeads, kHeadDim}, DType::Float32, &gen);
  const Tensor a = rand({1, kValueHeads}, DType::Float32, &gen);
  const Tensor b = rand({1, kValueHeads}, DType::Float32, &gen);
  DeltaNetDecodeWeights w;
  w.conv_weight = rand({channels, kKernel}, DType::Float32, &gen);
  w.A_log = rand({kValueHeads}, DType::Float32, &gen);
  w.dt_bias = rand({kValueHeads}, DType::Float32, &gen);
  w.norm_weight = rand({kHeadDim}, DType::Float32, &gen);
  w.key_heads = kKeyHeads;
  const int count = state_count();
  std::vector<Tensor> states, conv_states;
  for (int s = 0; s < count; ++s) {
    states.push_back(zeros({kValueHeads, kHeadDim, kHeadDim}));
    conv_states.push_back(zeros({kKernel - 1, channels}));
  }
  Tensor out = Tensor::empty({1, kValueHeads, kHeadDim}, DType::Float32);
  Row row;
  row.group = "delta_net_decode (fused step)";
  row.shape = fmt::format("Hk {} Hv {} dk {} dv {}, conv {}", kKeyHeads, kValueHeads, kHeadDim, kHeadDim, kKernel);
  row.timing = measure(
      [&](int i) {
        const size_t s = static_cast<size_t>(i % count);
        delta_net_decode_out(out, qkv, z, a, b, w, conv_states[s], states[s]);
      },
      quick ? 10 : 100, quick ? 0.05 : 0.4);
  const double state_bytes = 4.0 * kValueHeads * kHeadDim * kHeadDim;
  const double conv_bytes = 4.0 * channels * (kKernel + 2 * (kKernel - 1) + 1);  // weights, history, qkv
  row.bytes = 2.0 * state_bytes + conv_bytes + 4.0 * (3 * kValueHeads * kHeadDim + 2 * kValueHeads);
  row.flops = 7.0 * kValueHeads * kHeadDim * kHeadDim;
  row.target = fmt::format(">= {:.2f} of roofline", kRooflineTarget);
  row.has_target = true;
  row.target_met = table.roofline_gbps() > 0 && table.roofline_fraction(row) >= kRooflineTarget;
  table.add(row);
}

const Registrar kRegisterGatedDelta{Suite{
    "gated_delta",
    "Gated DeltaNet recurrent decode step (Qwen3.5-35B-A3B shapes, f32 state read and written once) vs the memory "
    "roofline, and the chunked prefill of 512 tokens vs the compute peak",
    [](ThreadPool&, Table& table, bool quick) {
      Generator gen(3);
      const Tensor q = rand({1, kKeyHeads, kHeadDim}, DType::Float32, &gen);
      const Tensor k = rand({1, kKeyHeads, kHeadDim}, DType::Float32, &gen);
      const Tensor v = rand({1, kValueHeads, kHeadDim}, DType::Float32, &gen);
      const Tensor g = full({1, kValueHeads}, Scalar(-0.1), DType::Float32);
      const Tensor beta = full({1, kValueHeads}, Scalar(0.5), DType::Float32);
      const int count = state_count();
      std::vector<Tensor> states;
      for (int s = 0; s < count; ++s) states.push_back(zeros({kValueHeads, kHeadDim, kHeadDim}));
      Row row;
      row.group = "gated_delta_rule decode";
      row.shape = fmt::format("Hk {} Hv {} dk {} dv {}, f32 state", kKeyHeads, kValueHeads, kHeadDim, kHeadDim);
      row.timing = measure([&](int i) { gated_delta_rule(q, k, v, g, beta, states[static_cast<size_t>(i % count)]); },
                           quick ? 10 : 100, quick ? 0.05 : 0.4);
      const double state_bytes = 4.0 * kValueHeads * kHeadDim * kHeadDim;
      row.bytes = 2.0 * state_bytes + 4.0 * (2 * kKeyHeads * kHeadDim + 2 * kValueHeads * kHeadDim + 2 * kValueHeads);
      row.flops = 7.0 * kValueHeads * kHeadDim * kHeadDim;  // per state entry: two multiply-adds read, three ops update
      row.target = fmt::format(">= {:.2f} of roofline", kRooflineTarget);
      row.has_target = true;
      row.target_met = table.roofline_gbps() > 0 && table.roofline_fraction(row) >= kRooflineTarget;
      table.add(row);
      add_fused_decode_row(table, quick);
      add_chunked_prefill_row(table, quick);
    }}};

}  // namespace

}  // namespace kiln::bench
