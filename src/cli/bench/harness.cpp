#include "cli/bench/harness.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace kiln::bench {

Timing measure(const std::function<void(int)>& fn, int min_runs, double min_seconds) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) fn(i);  // warm-up: page faults, pool wake-up, caches
  std::vector<double> times;
  Clock::time_point start = Clock::now();
  int i = 3;
  while (static_cast<int>(times.size()) < min_runs ||
         std::chrono::duration<double>(Clock::now() - start).count() < min_seconds) {
    Clock::time_point t0 = Clock::now();
    fn(i++);
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (times.size() >= 100000) break;
  }
  return summarize(std::move(times));
}

Timing summarize(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return {seconds[seconds.size() / 2], seconds.front(), static_cast<int>(seconds.size())};
}

std::vector<Suite>& registry() {
  static std::vector<Suite> suites;
  return suites;
}

double Table::gbps(const Row& r) const { return r.bytes > 0 ? r.bytes / r.timing.median_s / 1e9 : 0; }

double Table::roofline_fraction(const Row& r) const {
  return roofline_gbps_ > 0 ? gbps(r) / roofline_gbps_ : 0;
}

namespace {

std::string format_time(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

}  // namespace

std::string Table::format() const {
  std::string out = fmt::format("{:<28} {:<22} {:>10} {:>10} {:>9} {:>10} {:>8} {:>7}  {:<30} {}\n", "benchmark",
                                "shape", "median", "GB/s", "roofline", "GFLOP/s", "of peak", "vs base", "baseline",
                                "target");
  for (const Row& r : rows_) {
    std::string gb = r.bytes > 0 ? fmt::format("{:.1f}", gbps(r)) : "-";
    std::string frac = r.bytes > 0 ? fmt::format("{:.2f}", roofline_fraction(r)) : "-";
    const double gflops = r.flops > 0 ? r.flops / r.timing.median_s / 1e9 : 0;
    std::string gf = gflops > 0 ? fmt::format("{:.1f}", gflops) : "-";
    const double roof = r.peak_gflops > 0 ? r.peak_gflops : peak_gflops_;
    std::string peak = gflops > 0 && roof > 0 ? fmt::format("{:.2f}", gflops / roof) : "-";
    std::string vs = r.baseline_s ? fmt::format("{:.1f}x", *r.baseline_s / r.timing.median_s) : "-";
    std::string target = r.has_target ? fmt::format("{} ({})", r.target, r.target_met ? "met" : "MISSED") : "";
    out += fmt::format("{:<28} {:<22} {:>10} {:>10} {:>9} {:>10} {:>8} {:>7}  {:<30} {}\n", r.group, r.shape,
                       format_time(r.timing.median_s), gb, frac, gf, peak, vs, r.baseline_label, target);
  }
  return out;
}

}  // namespace kiln::bench
