// `kiln bench --filter linear_prefill` / `--filter moe_prefill` (also run by `--filter
// linear` / `--filter moe`): the many-token forms of linear and the MoE expert block,
// with bf16 weights, FP8 weights with row scales and FP8 weights with 128x128 block
// scales side by side, in GFLOP/s against this run's compute probe ("of peak"). The FP8
// rows against the bf16 rows of the same run are the cost of decoding FP8.
//   linear_prefill: x [M, K] bf16 (M = 64 and 512 prompt tokens), W [N, K]; the
//     Qwen3-30B-A3B q_proj (4096x2048) and o_proj (2048x4096) shapes.
//   moe_prefill: Qwen3-30B-A3B experts (H 2048, I 768) cut to 32 experts, top 2, so 64,
//     128, 256 and 512 tokens put 4, 8, 16 and 32 tokens on each expert, as top 8 of 128
//     does.
// Weight values are cheap pseudo-random codes (timing does not depend on them); FLOPs
// are 2 per multiply-add of the matrix products. Each row is also printed with the
// process's CPU time per call (warm-up calls included): on a machine shared with other
// work, run with KILN_NUM_THREADS=1 and compare those figures, which count only the
// cycles this process got (with more threads they include the pool's spinning).
#include <fmt/core.h>

#include <time.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/bench/fp8_inputs.h"
#include "cli/bench/harness.h"
#include "kiln/cpu_features.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/moe.h"

namespace kiln::bench {

namespace {

enum class Weights { Bf16, Fp8Rows, Fp8Blocks };

const char* weights_name(Weights w) {
  switch (w) {
    case Weights::Bf16: return "bf16";
    case Weights::Fp8Rows: return "fp8 row scales";
    case Weights::Fp8Blocks: return "fp8 block scales";
  }
  return "?";
}

constexpr Weights kAllWeights[] = {Weights::Bf16, Weights::Fp8Rows, Weights::Fp8Blocks};

// A linear congruential stream, one state per tensor.
struct Lcg {
  uint64_t state;
  uint32_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  }
};

// bf16 values of both signs with magnitudes in [2^-8, 2).
Tensor pseudo_random_bf16(const Shape& shape, uint64_t seed) {
  Tensor t = empty(shape, DType::BFloat16);
  uint16_t* p = t.data<uint16_t>();
  Lcg g{seed * 0x9E3779B97F4A7C15ull + 1};
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint32_t r = g.next();
    p[i] = static_cast<uint16_t>((r & 0x8000u) | (0x3B80u + (r >> 16) % 0x480u));
  }
  return t;
}

int runs(bool quick) { return quick ? 3 : 10; }
double seconds(bool quick) { return quick ? 0.3 : 2.0; }

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// measure() plus the mean CPU time per call, printed at once with the row's FLOP rate.
Timing measure_and_print_cpu(const std::string& label, double flops, const std::function<void(int)>& fn,
                             bool quick) {
  constexpr int kWarmups = 3;  // measure()'s
  const double cpu0 = process_cpu_seconds();
  const Timing t = measure(fn, runs(quick), seconds(quick));
  const double cpu = (process_cpu_seconds() - cpu0) / (t.runs + kWarmups);
  fmt::print("cpu time: {:<70} {:8.2f} ms/call {:7.1f} GFLOP/s\n", label, cpu * 1e3, flops / cpu / 1e9);
  return t;
}

void linear_rows(Table& table, bool quick) {
  struct LinearShape {
    const char* name;
    int64_t N, K;
  };
  for (const LinearShape s : {LinearShape{"Qwen3-30B-A3B q_proj", 4096, 2048}, LinearShape{"Qwen3-30B-A3B o_proj", 2048, 4096}}) {
    const Tensor w_bf16 = pseudo_random_bf16({s.N, s.K}, 11);
    const Tensor w_fp8 = pseudo_random_fp8({s.N, s.K}, 12);
    for (const int64_t M : {int64_t{64}, int64_t{512}}) {
      const Tensor x = pseudo_random_bf16({M, s.K}, 7);
      for (const Weights kind : kAllWeights) {
        const Tensor scale = fp8_scales({}, s.N, s.K, kind == Weights::Fp8Blocks, 1.0 / 256);
        Row row;
        row.group = fmt::format("linear prefill {}", weights_name(kind));
        row.shape = fmt::format("{} x [{}x{}] {}", M, s.N, s.K, s.name);
        row.flops = 2.0 * static_cast<double>(M) * static_cast<double>(s.N) * static_cast<double>(s.K);
        // Many-row linear with bf16 or FP8 weights runs the bf16 dot tiles where they are on.
        if (bf16_dot_enabled()) row.peak_gflops = table.bf16_dot_gflops();
        row.timing = measure_and_print_cpu(
            row.group + " " + row.shape, row.flops,
            [&](int) {
              if (kind == Weights::Bf16) {
                linear(x, w_bf16);
              } else {
                linear_fp8(x, w_fp8, scale);
              }
            },
            quick);
        table.add(row);
      }
    }
  }
}

constexpr int64_t kHidden = 2048;
constexpr int64_t kInter = 768;
constexpr int64_t kExperts = 32;
constexpr int64_t kTopK = 2;

MoeExperts make_experts(Weights kind) {
  if (kind == Weights::Bf16) {
    return MoeExperts::from_fused(pseudo_random_bf16({kExperts, 2 * kInter, kHidden}, 21),
                                  pseudo_random_bf16({kExperts, kHidden, kInter}, 22));
  }
  const bool blocked = kind == Weights::Fp8Blocks;
  return MoeExperts::from_fused(pseudo_random_fp8({kExperts, 2 * kInter, kHidden}, 23),
                                pseudo_random_fp8({kExperts, kHidden, kInter}, 24),
                                fp8_scales({kExperts}, 2 * kInter, kHidden, blocked, 1.0 / 256),
                                fp8_scales({kExperts}, kHidden, kInter, blocked, 1.0 / 256));
}

void moe_rows(Table& table, bool quick) {
  for (const Weights kind : kAllWeights) {
    const MoeExperts experts = make_experts(kind);
    for (const int64_t T : {int64_t{64}, int64_t{128}, int64_t{256}, int64_t{512}}) {
      const Tensor x = pseudo_random_bf16({T, kHidden}, 31);
      // Token t goes to experts t and t + E/2 (mod E): every expert gets T * k / E tokens.
      Tensor ids = empty({T, kTopK}, DType::Int32);
      for (int64_t t = 0; t < T; ++t) {
        ids.data<int32_t>()[t * kTopK] = static_cast<int32_t>(t % kExperts);
        ids.data<int32_t>()[t * kTopK + 1] = static_cast<int32_t>((t + kExperts / 2) % kExperts);
      }
      const Tensor weights = full({T, kTopK}, Scalar(0.5), DType::Float32);
      Row row;
      row.group = fmt::format("moe_experts prefill {}", weights_name(kind));
      row.shape = fmt::format("{} tok, {} per expert: {} experts top {}, H {} I {}", T, T * kTopK / kExperts, kExperts,
                              kTopK, kHidden, kInter);
      row.flops = 2.0 * static_cast<double>(T * kTopK) * 3.0 * static_cast<double>(kHidden * kInter);
      // The expert kernel takes the bf16 dot tiles from 6 tokens per expert (the float32
      // FMA tiles below): of these rows (4, 8, 16, 32 per expert), all but the first.
      if (bf16_dot_enabled() && T * kTopK / kExperts >= 8) row.peak_gflops = table.bf16_dot_gflops();
      row.timing = measure_and_print_cpu(row.group + " " + row.shape, row.flops,
                                         [&](int) { moe_experts(x, weights, ids, experts); }, quick);
      table.add(row);
    }
  }
}

const Registrar kRegisterLinearPrefill{Suite{
    "linear_prefill",
    "many-row linear (prefill, 64 and 512 tokens), bf16 vs FP8 row and block scales, vs the compute probe",
    [](ThreadPool&, Table& table, bool quick) { linear_rows(table, quick); }}};

const Registrar kRegisterMoePrefill{Suite{
    "moe_prefill",
    "MoE expert block over a prompt (4, 8, 16 and 32 tokens per expert), bf16 vs FP8 row and block scales, vs the "
    "compute probe",
    [](ThreadPool&, Table& table, bool quick) { moe_rows(table, quick); }}};

}  // namespace

}  // namespace kiln::bench
