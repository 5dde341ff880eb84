// `kiln bench --filter wake`: small one-row linear calls the way interactive use makes
// them, against the same calls on one thread. Op-by-op Python code and servers between
// requests call a small kernel, then spend tens of microseconds to seconds elsewhere, so
// the pool's workers have gone to sleep (and their vCPUs may have been parked by the
// host) when the next call comes. A kernel split over threads must then still be no
// slower than the caller doing it alone.
//
// Three ways of calling, per shape: back to back; spaced (a pause of kGap between
// calls, not timed); and the first calls after the process sat idle for a while.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "cli/bench/harness.h"
#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/linear.h"
#include "kiln/thread_pool.h"

namespace kiln::bench {

namespace {

using Clock = std::chrono::steady_clock;

// About what one Python statement between two kernel calls costs.
constexpr auto kGap = std::chrono::microseconds(200);
// Calls timed after each idle pause: the first pays the deepest wake-up, the next ones
// show whether the pool stays slow once woken.
constexpr int kCallsAfterIdle = 5;

// Each call after `gap` of sleep; only the calls are timed.
template <typename Call>
Timing measure_spaced(const Call& call, int runs, Clock::duration gap) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    std::this_thread::sleep_for(gap);
    const Clock::time_point t0 = Clock::now();
    call();
    times.push_back(seconds_since(t0));
  }
  return summarize(std::move(times));
}

// The first kCallsAfterIdle calls after each of `pauses` idle pauses.
template <typename Call>
Timing measure_after_idle(const Call& call, int pauses, Clock::duration idle) {
  std::vector<double> times;
  for (int p = 0; p < pauses; ++p) {
    std::this_thread::sleep_for(idle);
    for (int i = 0; i < kCallsAfterIdle; ++i) {
      const Clock::time_point t0 = Clock::now();
      call();
      times.push_back(seconds_since(t0));
      std::this_thread::sleep_for(kGap);
    }
  }
  return summarize(std::move(times));
}

struct Mode {
  const char* name;
  Timing (*measure)(const std::function<void()>& call, bool quick);
};

const Mode kModes[] = {
    {"back to back",
     [](const std::function<void()>& call, bool quick) {
       return measure([&](int) { call(); }, quick ? 20 : 200, quick ? 0.02 : 0.2);
     }},
    {"spaced 200us",
     [](const std::function<void()>& call, bool quick) { return measure_spaced(call, quick ? 20 : 300, kGap); }},
    {"after idle",
     [](const std::function<void()>& call, bool quick) {
       return measure_after_idle(call, quick ? 1 : 3,
                                 quick ? std::chrono::milliseconds(300) : std::chrono::milliseconds(2000));
     }},
};

void run_shape(ThreadPool& pool, Table& table, int64_t N, int64_t K, bool quick) {
  // Small enough to stay in cache: this is about the pool, not about memory.
  const Tensor w = randn({N, K}, DType::BFloat16);
  const Tensor x = randn({1, K}, DType::BFloat16);
  const auto call = [&] { linear(x, w); };
  const double bytes = static_cast<double>(w.nbytes()) + 2.0 * static_cast<double>(K + N);
  for (const Mode& mode : kModes) {
    Timing one_thread;
    {
      ThreadsScope single(1);
      one_thread = mode.measure(call, quick);
    }
    Row row;
    row.group = fmt::format("wake bf16 {}", mode.name);
    row.shape = fmt::format("{}x{}", N, K);
    row.timing = mode.measure(call, quick);
    row.bytes = bytes;
    row.baseline_s = one_thread.median_s;
    row.baseline_label = "same calls on 1 thread";
    row.target = fmt::format("{} threads no slower than 1", pool.num_threads());
    row.has_target = true;
    row.target_met = row.timing.median_s <= one_thread.median_s * 1.05;
    table.add(row);
  }
}

const Registrar kRegisterWake{Suite{
    "wake",
    "small one-row linear calls back to back, spaced like op-by-op Python, and after the process sat idle, "
    "against the same calls on one thread",
    [](ThreadPool& pool, Table& table, bool quick) {
      fmt::print("wake: one-row bf16 linear, {} threads vs 1; spaced calls sleep 200 us between calls (untimed); "
                 "'after idle' times the first {} calls after each idle pause of {}\n",
                 pool.num_threads(), kCallsAfterIdle, quick ? "0.3 s" : "2 s");
      run_shape(pool, table, 128, 2048, quick);
      run_shape(pool, table, 768, 2048, quick);
    }}};

}  // namespace

}  // namespace kiln::bench
