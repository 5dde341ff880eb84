// The profiler's records: one table keyed by (phase, op) name pointers under a mutex,
// touched only while recording, merged by name when the report is taken.
#include "kiln/profiler.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>

#include "core/op_profile.h"
#include "kiln/vulkan.h"

namespace kiln::profiler {

namespace detail {

std::atomic<bool> g_recording{false};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int& depth() {
  thread_local int d = 0;
  return d;
}

}  // namespace detail

namespace {

thread_local const char* t_phase = "";

struct Totals {
  int64_t calls = 0;
  int64_t ns = 0;
  double bytes = 0, flops = 0;
};

struct PhaseTotals {
  int64_t ns = 0;
  int64_t tokens = 0;
  int order = 0;
  int64_t device_commands = 0, device_submits = 0, device_waits = 0;
};

struct Records {
  std::mutex mutex;
  // Names are string literals: keyed by pointer while recording, merged by text later.
  std::map<std::pair<const char*, const char*>, Totals> ops;
  std::map<std::string, PhaseTotals> phases;
};

Records& records() {
  static Records r;
  return r;
}

std::string format_seconds(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

}  // namespace

namespace detail {

void record(const char* op, int64_t ns, double bytes, double flops) {
  Records& r = records();
  std::lock_guard lock(r.mutex);
  Totals& t = r.ops[{t_phase, op}];
  ++t.calls;
  t.ns += ns;
  t.bytes += bytes;
  t.flops += flops;
}

}  // namespace detail

void start() {
  Records& r = records();
  std::lock_guard lock(r.mutex);
  r.ops.clear();
  r.phases.clear();
  detail::g_recording.store(true, std::memory_order_relaxed);
}

bool enabled() { return detail::g_recording.load(std::memory_order_relaxed); }

Report stop() {
  detail::g_recording.store(false, std::memory_order_relaxed);
  Records& r = records();
  std::lock_guard lock(r.mutex);
  std::map<std::pair<std::string, std::string>, Totals> merged;
  for (const auto& [key, t] : r.ops) {
    Totals& m = merged[{key.first, key.second}];
    m.calls += t.calls;
    m.ns += t.ns;
    m.bytes += t.bytes;
    m.flops += t.flops;
  }
  Report report;
  for (const auto& [name, p] : r.phases) {
    report.phases.push_back(
        {name, static_cast<double>(p.ns) * 1e-9, p.tokens, p.device_commands, p.device_submits, p.device_waits});
  }
  std::sort(report.phases.begin(), report.phases.end(), [&](const PhaseRecord& a, const PhaseRecord& b) {
    return r.phases.at(a.phase).order < r.phases.at(b.phase).order;
  });
  for (const auto& [key, t] : merged) {
    report.ops.push_back({key.first, key.second, t.calls, static_cast<double>(t.ns) * 1e-9, t.bytes, t.flops});
  }
  const auto phase_rank = [&](const std::string& phase) -> int {
    const auto it = r.phases.find(phase);
    return it == r.phases.end() ? static_cast<int>(r.phases.size()) : it->second.order;
  };
  std::sort(report.ops.begin(), report.ops.end(), [&](const OpRecord& a, const OpRecord& b) {
    const int pa = phase_rank(a.phase), pb = phase_rank(b.phase);
    if (pa != pb) return pa < pb;
    return a.seconds > b.seconds;
  });
  r.ops.clear();
  r.phases.clear();
  return report;
}

PhaseScope::PhaseScope(const char* phase) : phase_(phase), outer_(t_phase), start_ns_(detail::now_ns()) {
  t_phase = phase;
  if (!enabled()) return;
  const VulkanQueueStats q = vulkan_queue_stats();
  start_commands_ = q.commands;
  start_submits_ = q.submits;
  start_waits_ = q.waits;
}

PhaseScope::~PhaseScope() {
  t_phase = outer_;
  if (!enabled()) return;
  const int64_t ns = detail::now_ns() - start_ns_;
  Records& r = records();
  std::lock_guard lock(r.mutex);
  auto [it, inserted] = r.phases.try_emplace(phase_);
  if (inserted) it->second.order = static_cast<int>(r.phases.size());
  it->second.ns += ns;
  it->second.tokens += tokens_;
  const VulkanQueueStats q = vulkan_queue_stats();
  it->second.device_commands += q.commands - start_commands_;
  it->second.device_submits += q.submits - start_submits_;
  it->second.device_waits += q.waits - start_waits_;
}

std::string Report::format(double roofline_gbps, double peak_gflops) const {
  std::string out;
  // Ops outside any phase form a phase of their own, named "(no phase)".
  std::vector<PhaseRecord> all = phases;
  for (const OpRecord& op : ops) {
    const bool known = std::any_of(all.begin(), all.end(), [&](const PhaseRecord& p) { return p.phase == op.phase; });
    if (!known) all.push_back({op.phase, 0, 0});
  }
  for (const PhaseRecord& phase : all) {
    double kernel_s = 0;
    for (const OpRecord& op : ops) {
      if (op.phase == phase.phase) kernel_s += op.seconds;
    }
    const double total_s = phase.seconds > 0 ? phase.seconds : kernel_s;
    const std::string name = phase.phase.empty() ? "(no phase)" : phase.phase;
    out += fmt::format("profile: {}: {} wall", name, format_seconds(total_s));
    if (phase.tokens > 0) {
      out += fmt::format(", {} tokens, {} per token, {:.2f} tokens/s", phase.tokens,
                         format_seconds(total_s / static_cast<double>(phase.tokens)),
                         static_cast<double>(phase.tokens) / total_s);
    }
    out += "\n";
    if (phase.device_commands > 0 || phase.device_waits > 0) {
      // What batched submission costs the host: submits and waits per token.
      const double per = phase.tokens > 0 ? 1.0 / static_cast<double>(phase.tokens) : 1.0;
      out += fmt::format("  vulkan: {:.1f} commands, {:.2f} submits, {:.2f} host waits {}\n",
                         static_cast<double>(phase.device_commands) * per,
                         static_cast<double>(phase.device_submits) * per,
                         static_cast<double>(phase.device_waits) * per, phase.tokens > 0 ? "per token" : "in all");
    }
    out += fmt::format("  {:<30} {:>8} {:>11} {:>7} {:>11} {:>9} {:>9} {:>9} {:>8}\n", "op", "calls", "time",
                       "share", "per token", "GB/s", "of roof", "GFLOP/s", "of peak");
    const auto row = [&](const std::string& op, int64_t calls, double s, double bytes, double flops) {
      const double share = total_s > 0 ? s / total_s : 0;
      const std::string per_token =
          phase.tokens > 0 ? format_seconds(s / static_cast<double>(phase.tokens)) : std::string("-");
      const double gbps = s > 0 && bytes > 0 ? bytes / s / 1e9 : 0;
      const double gflops = s > 0 && flops > 0 ? flops / s / 1e9 : 0;
      out += fmt::format("  {:<30} {:>8} {:>11} {:>6.1f}% {:>11} {:>9} {:>9} {:>9} {:>8}\n", op,
                         calls >= 0 ? fmt::format("{}", calls) : "-", format_seconds(s), share * 100, per_token,
                         gbps > 0 ? fmt::format("{:.1f}", gbps) : "-",
                         gbps > 0 && roofline_gbps > 0 ? fmt::format("{:.2f}", gbps / roofline_gbps) : "-",
                         gflops > 0 ? fmt::format("{:.1f}", gflops) : "-",
                         gflops > 0 && peak_gflops > 0 ? fmt::format("{:.2f}", gflops / peak_gflops) : "-");
    };
    for (const OpRecord& op : ops) {
      if (op.phase == phase.phase) row(op.op, op.calls, op.seconds, op.bytes, op.flops);
    }
    if (phase.seconds > 0) {
      // Wall time no op accounts for: front-end checks, allocation, sampling, the model's
      // own host work, and threads waking up.
      row("(between kernels)", -1, std::max(0.0, phase.seconds - kernel_s), 0, 0);
    }
  }
  return out;
}

}  // namespace kiln::profiler
