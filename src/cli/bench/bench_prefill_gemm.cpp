// `kiln bench --filter prefill_gemm`: the GEMMs of a 512-token prefill with bf16 weights,
// Qwen3-30B-A3B shapes, on the float32 FMA path and on the bf16 dot path (AVX512-BF16,
// kiln/cpu_features.h), alternated call by call in one process:
//   linear    q_proj [4096, 2048], k/v_proj [512, 2048], o_proj [2048, 4096]
//   moe_experts  32 of the 128 experts, top 2: 32 tokens per expert, as 128 experts with
//             top 8 give 512 tokens, at a quarter of the weights (H 2048, I 768)
// and the same q_proj, o_proj and experts with FP8 weights (row scales and 128x128 block
// scales): their float32 path widens the weights for sgemm / decodes them in FMA tiles,
// their bf16 dot path decodes them exactly to bf16 for the dot tiles.
// The float32 rows are measured against the float32 FMA peak, the bf16 dot rows against
// the bf16 dot peak, both from this run's compute probe; "vs base" is the float32 path's
// median over the bf16 dot path's, same process.
#include <fmt/core.h>

#include <time.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cli/bench/fp8_inputs.h"
#include "cli/bench/harness.h"
#include "kiln/cpu_features.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/moe.h"

namespace kiln::bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kTokens = 512;
constexpr int64_t kHidden = 2048;
constexpr double kPeakTarget = 0.6;

Tensor random_weights(const Shape& shape, int64_t fan_in, uint64_t seed) {
  Generator g(seed);
  return mul(sub(rand(shape, DType::Float32, &g), Scalar(0.5)), Scalar(2.0 / std::sqrt(double(fan_in))))
      .to(DType::BFloat16);
}

struct Paired {
  Timing f32_path, bf16_dot_path;
  Timing f32_cpu, bf16_dot_cpu;  // process CPU time per call
};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// fn alternately on the float32 path and (where the CPU has it) the bf16 dot path: one
// warm-up call each, then `rounds` timed calls each, interleaved. Wall time and process
// CPU time: on a loaded machine with a one-thread pool (KILN_NUM_THREADS=1) the CPU time
// is the code's cost, the wall time the machine's share of it.
Paired alternate(const std::function<void()>& fn, int rounds) {
  const bool dot = cpu_has_bf16_dot();
  std::vector<double> times[2], cpu[2];
  for (int r = -1; r < rounds; ++r) {
    for (int mode = 0; mode <= (dot ? 1 : 0); ++mode) {
      set_bf16_dot_enabled(mode);
      const double c0 = process_cpu_seconds();
      const Clock::time_point t0 = Clock::now();
      fn();
      if (r >= 0) {
        times[mode].push_back(seconds_since(t0));
        cpu[mode].push_back(process_cpu_seconds() - c0);
      }
    }
  }
  set_bf16_dot_enabled(-1);
  return {summarize(times[0]), dot ? summarize(times[1]) : Timing{}, summarize(cpu[0]),
          dot ? summarize(cpu[1]) : Timing{}};
}

void add_pair(Table& table, const std::string& group, const std::string& shape, double flops, const Paired& p) {
  const auto rate = [&](const Timing& t) { return flops / t.median_s / 1e9; };
  if (cpu_has_bf16_dot()) {
    fmt::print("prefill_gemm: {} {}: CPU time per call f32 FMA {:.1f} ms ({:.1f} GFLOP/s), bf16 dot {:.1f} ms "
               "({:.1f} GFLOP/s), {:.2f}x\n",
               group, shape, 1e3 * p.f32_cpu.median_s, rate(p.f32_cpu), 1e3 * p.bf16_dot_cpu.median_s,
               rate(p.bf16_dot_cpu), p.f32_cpu.median_s / p.bf16_dot_cpu.median_s);
  }
  Row f32;
  f32.group = group + " f32 FMA";
  f32.shape = shape;
  f32.timing = p.f32_path;
  f32.flops = flops;
  table.add(f32);
  if (!cpu_has_bf16_dot()) return;
  Row dot;
  dot.group = group + " bf16 dot";
  dot.shape = shape;
  dot.timing = p.bf16_dot_path;
  dot.flops = flops;
  dot.peak_gflops = table.bf16_dot_gflops();
  dot.baseline_s = p.f32_path.median_s;
  dot.baseline_label = "f32 FMA path, same process";
  dot.target = fmt::format(">= {:.2f} of bf16 peak", kPeakTarget);
  dot.has_target = true;
  dot.target_met = dot.peak_gflops > 0 && flops / dot.timing.median_s / 1e9 >= kPeakTarget * dot.peak_gflops;
  table.add(dot);
}

const char* scales_name(bool blocked) { return blocked ? "fp8 block scales" : "fp8 row scales"; }

void run_linear_fp8(Table& table, int64_t N, int64_t K, const char* name, bool blocked, int rounds) {
  const Tensor w = pseudo_random_fp8({N, K}, 30 + N + K);
  const Tensor scale = fp8_scales({}, N, K, blocked, 1.0 / (400.0 * std::sqrt(double(K))));
  const Tensor x = random_weights({kTokens, K}, 1, 20 + K);
  add_pair(table, fmt::format("linear prefill {}", scales_name(blocked)),
           fmt::format("{} [{},{}]x[{},{}]^T", name, kTokens, K, N, K), 2.0 * kTokens * N * K,
           alternate([&] { (void)linear_fp8(x, w, scale); }, rounds));
}

void run_moe_fp8(Table& table, bool blocked, int rounds) {
  const int64_t experts = 32, top_k = 2, inter = 768;
  const MoeExperts e = MoeExperts::from_fused(
      pseudo_random_fp8({experts, 2 * inter, kHidden}, 5), pseudo_random_fp8({experts, kHidden, inter}, 6),
      fp8_scales({experts}, 2 * inter, kHidden, blocked, 1.0 / (400.0 * std::sqrt(double(kHidden)))),
      fp8_scales({experts}, kHidden, inter, blocked, 1.0 / (400.0 * std::sqrt(double(inter)))));
  const Tensor x = random_weights({kTokens, kHidden}, 1, 3);
  Generator g(4);
  const MoeRouting r = moe_route(randn({kTokens, experts}, DType::Float32, &g), top_k, MoeScoring::Softmax, true);
  add_pair(table, fmt::format("moe_experts prefill {}", scales_name(blocked)),
           fmt::format("{} tok, {} of {} experts, H {} I {}", kTokens, top_k, experts, kHidden, inter),
           2.0 * 3.0 * kTokens * top_k * kHidden * inter,
           alternate([&] { (void)moe_experts(x, r.weights, r.ids, e); }, rounds));
}

void run_linear(Table& table, int64_t N, int64_t K, const char* name, int rounds) {
  const Tensor w = random_weights({N, K}, K, 10 + N + K);
  const Tensor x = random_weights({kTokens, K}, 1, 20 + K);
  add_pair(table, "linear prefill bf16", fmt::format("{} [{},{}]x[{},{}]^T", name, kTokens, K, N, K),
           2.0 * kTokens * N * K, alternate([&] { (void)linear(x, w); }, rounds));
}

void run_moe(Table& table, int rounds) {
  const int64_t experts = 32, top_k = 2, inter = 768;
  const Tensor gate_up = random_weights({experts, 2 * inter, kHidden}, kHidden, 1);
  const Tensor down = random_weights({experts, kHidden, inter}, inter, 2);
  const MoeExperts e = MoeExperts::from_fused(gate_up, down);
  const Tensor x = random_weights({kTokens, kHidden}, 1, 3);
  Generator g(4);
  const MoeRouting r = moe_route(randn({kTokens, experts}, DType::Float32, &g), top_k, MoeScoring::Softmax, true);
  add_pair(table, "moe_experts prefill bf16",
           fmt::format("{} tok, {} of {} experts, H {} I {}", kTokens, top_k, experts, kHidden, inter),
           2.0 * 3.0 * kTokens * top_k * kHidden * inter,
           alternate([&] { (void)moe_experts(x, r.weights, r.ids, e); }, rounds));
}

const Registrar kRegisterPrefillGemm{Suite{
    "prefill_gemm",
    "512-token prefill GEMMs with bf16 and FP8 weights (Qwen3-30B-A3B linear and expert shapes): float32 FMA "
    "path vs bf16 dot path, alternated, vs the compute peaks",
    [](ThreadPool&, Table& table, bool quick) {
      const int rounds = quick ? 3 : 9;
      if (!cpu_has_bf16_dot()) fmt::print("prefill_gemm: no AVX512-BF16 on this CPU: float32 path only\n");
      run_linear(table, 4096, kHidden, "q_proj", rounds);
      run_linear(table, 512, kHidden, "k_proj", rounds);
      run_linear(table, kHidden, 4096, "o_proj", rounds);
      run_moe(table, rounds);
      for (bool blocked : {false, true}) {
        run_linear_fp8(table, 4096, kHidden, "q_proj", blocked, rounds);
        run_linear_fp8(table, kHidden, 4096, "o_proj", blocked, rounds);
        run_moe_fp8(table, blocked, rounds);
      }
    }}};

}  // namespace

}  // namespace kiln::bench
