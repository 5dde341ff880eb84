// Peak compute probe: the compute roofline prefill figures are reported against, as the
// bandwidth probe is the roofline of decode.
//
// Independent chains of vector FMAs on registers, compiled once per Highway target: twelve
// accumulators cover an FMA latency of 4 cycles at two FMAs per cycle, so the loop is
// bound by the FMA units alone. Every pool thread runs the loop at once (as a kernel
// would), and the median of several passes is reported. Where the CPU has AVX512-BF16,
// the same is done with chains of vdpbf16ps (32 multiply-adds each): the roofline of the
// prefill GEMMs that run on it (kiln/cpu_features.h).
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

#include "kiln/cpu_features.h"
#include "kiln/error.h"
#include "kiln/runtime.h"
#include "kiln/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln {
HWY_EXPORT(FmaChainsF32);

namespace {

volatile float g_sink = 0;

using ChainsFn = double (*)(int64_t iterations, float* checksum);

double fma_chains(int64_t iterations, float* checksum) { return HWY_DYNAMIC_DISPATCH(FmaChainsF32)(iterations, checksum); }

#if defined(__x86_64__)
// `iterations` rounds of 16 independent vdpbf16ps (16 accumulators cover a latency of up
// to 8 cycles at two per cycle); returns the FLOPs done (64 per instruction: 16 lanes of
// 2 multiply-adds). Both operands are bf16 1/1024, so each lane grows by 2^-19 a round:
// finite and normal for any iteration count the probe takes.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) double dot_chains_bf16(int64_t iterations,
                                                                                       float* checksum) {
  constexpr int kDotChains = 16;
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3A803A80);
  __m512 v[kDotChains];
  for (int c = 0; c < kDotChains; ++c) v[c] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kDotChains; ++c) v[c] = _mm512_dpbf16_ps(v[c], a, a);
  }
  __m512 total = v[0];
  for (int c = 1; c < kDotChains; ++c) total = _mm512_add_ps(total, v[c]);
  *checksum = _mm512_reduce_add_ps(total);
  return 64.0 * kDotChains * static_cast<double>(iterations);
}
#endif

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// GFLOP/s of one pass: every thread of `pool` (or the caller alone) runs the loop.
double timed_pass(ThreadPool* pool, int64_t iterations, ChainsFn chains = fma_chains) {
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  std::vector<double> flops(static_cast<size_t>(threads) * 8, 0.0);
  std::vector<float> sums(static_cast<size_t>(threads) * 16, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  const auto work = [&](int t) {
    flops[static_cast<size_t>(t) * 8] =
        chains(iterations, &sums[static_cast<size_t>(t) * 16]);
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
  result.bf16_dot_available = cpu_has_bf16_dot();
  result.bf16_dot_used = bf16_dot_enabled();
#if defined(__x86_64__)
  if (result.bf16_dot_available) {
    single.clear();
    all.clear();
    timed_pass(&pool, std::min<int64_t>(iterations, 100000), dot_chains_bf16);
    for (int r = 0; r < repeats; ++r) {
      single.push_back(timed_pass(nullptr, iterations, dot_chains_bf16));
      all.push_back(timed_pass(&pool, iterations, dot_chains_bf16));
    }
    result.bf16_dot_gflops_1thread = median(single);
    result.bf16_dot_gflops_all = median(all);
  }
#endif
  return result;
}

}  // namespace kiln

#endif  // HWY_ONCE
