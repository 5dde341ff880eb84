// Peak compute probe: the compute roofline prefill figures are reported against, as the
// bandwidth probe is the roofline of decode.
//
// Independent chains of vector FMAs on registers, compiled once per Highway target: twelve
// accumulators cover an FMA latency of 4 cycles at two FMAs per cycle, so the loop is
// bound by the FMA units alone. Every pool thread runs the loop at once (as a kernel
// would), and the median of several passes is reported.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/compute_probe.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace kiln {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kChains = 12;

// Runs `iterations` rounds of kChains float32 FMAs; returns the FLOPs done (2 per lane
// per FMA) and writes a checksum so the work cannot be dropped.
double FmaChainsF32(int64_t iterations, float* checksum) {
  const hn::ScalableTag<float> d;
  // Multiplier just below 1 and a small addend: values stay finite and normal forever.
  const auto m = hn::Set(d, 0.999999f);
  const auto a = hn::Set(d, 1e-7f);
  hn::Vec<decltype(d)> v[kChains];
  for (int c = 0; c < kChains; ++c) v[c] = hn::Set(d, 1.0f + 0.01f * static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) v[c] = hn::MulAdd(v[c], m, a);
  }
  auto total = v[0];
  for (int c = 1; c < kChains; ++c) total = hn::Add(total, v[c]);
  *checksum = hn::GetLane(hn::SumOfLanes(d, total));
  return 2.0 * static_cast<double>(hn::Lanes(d)) * kChains * static_cast<double>(iterations);
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <chrono>
#include <vector>

#include "kiln/error.h"
#include "kiln/runtime.h"
#include "kiln/thread_pool.h"

namespace kiln {
HWY_EXPORT(FmaChainsF32);

namespace {

volatile float g_sink = 0;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// GFLOP/s of one pass: every thread of `pool` (or the caller alone) runs the loop.
double timed_pass(ThreadPool* pool, int64_t iterations) {
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  std::vector<double> flops(static_cast<size_t>(threads) * 8, 0.0);
  std::vector<float> sums(static_cast<size_t>(threads) * 16, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  const auto work = [&](int t) {
    flops[static_cast<size_t>(t) * 8] =
        HWY_DYNAMIC_DISPATCH(FmaChainsF32)(iterations, &sums[static_cast<size_t>(t) * 16]);
  };
  if (pool != nullptr) {
    pool->run_on_all(work);
  } else {
    work(0);
  }
  const double seconds =
      std::max(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1e-9);
  double total = 0;
  for (int t = 0; t < threads; ++t) {
    total += flops[static_cast<size_t>(t) * 8];
    g_sink = g_sink + sums[static_cast<size_t>(t) * 16];
  }
  return total / seconds / 1e9;
}

}  // namespace

ComputeResult measure_peak_compute(ThreadPool& pool, int64_t iterations, int repeats) {
  KILN_CHECK_KIND(repeats >= 1, Value, "measure_peak_compute", "repeats must be >= 1, got {}", repeats);
  KILN_CHECK_KIND(iterations >= 1 && iterations <= (int64_t{1} << 40), Value, "measure_peak_compute",
                  "iterations must be in 1..2^40, got {}", iterations);
  std::vector<double> single, all;
  timed_pass(&pool, std::min<int64_t>(iterations, 100000));  // wake the workers, raise the clocks
  for (int r = 0; r < repeats; ++r) {
    single.push_back(timed_pass(nullptr, iterations));
    all.push_back(timed_pass(&pool, iterations));
  }
  ComputeResult result;
  result.f32_gflops_1thread = median(single);
  result.f32_gflops_all = median(all);
  result.threads = pool.num_threads();
  result.repeats = repeats;
  const std::vector<std::string> features = cpu_info().features;
  result.bf16_dot_available = std::find(features.begin(), features.end(), "avx512_bf16") != features.end();
  return result;
}

}  // namespace kiln

#endif  // HWY_ONCE
