// Where the time goes: per-op time, bytes and FLOPs, grouped by phase (prefill, decode),
// plus the time between kernels. Off unless started; when off an op pays one relaxed
// atomic load.
//
//   kiln::profiler::start();
//   ... run ops or a model ...
//   kiln::profiler::Report r = kiln::profiler::stop();
//   fmt::print("{}", r.format(roofline_gbps, peak_gflops));
//
// Ops record themselves (the outermost op on a thread only: a composite's inner ops count
// as the composite). A PhaseScope names what the calling thread is doing and measures the
// phase's wall time, so the report can show the time no kernel accounts for: dispatch,
// shape checks, allocation, sampling and waiting for threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::profiler {

struct OpRecord {
  std::string phase;  // the PhaseScope around the call ("" outside any)
  std::string op;     // the op's name ("linear", "moe_experts", "mul", ...)
  int64_t calls = 0;
  double seconds = 0;
  double bytes = 0;  // bytes the op's inputs and outputs hold (what it must move at least)
  double flops = 0;  // multiply-adds count 2; 0 for ops measured by bytes only
};

struct PhaseRecord {
  std::string phase;
  double seconds = 0;  // wall time inside the phase's scopes
  int64_t tokens = 0;  // tokens the phase processed (PhaseScope::add_tokens)
  // The Vulkan queue inside the phase's scopes (kiln/vulkan.h vulkan_queue_stats; zero
  // without a device): commands recorded, command-buffer submits, host waits.
  int64_t device_commands = 0, device_submits = 0, device_waits = 0;
};

struct Report {
  std::vector<OpRecord> ops;        // by phase, then by time, longest first
  std::vector<PhaseRecord> phases;  // in the order they first ran
  // A table per phase: each op's calls, time, share of the phase, GB/s and GFLOP/s, time
  // per token, and the row of time between kernels. The fractions of the rooflines are
  // shown where they are given (> 0).
  std::string format(double roofline_gbps = 0, double peak_gflops = 0) const;
};

// Clears what was recorded and starts recording (all threads).
void start();
// Stops recording and returns what was recorded since start().
Report stop();
bool enabled();

// Names the phase of the calling thread's ops for its lifetime and adds its wall time to
// the phase (only while recording). Nested scopes: the innermost names the ops, and
// each adds its own wall time, so do not nest one phase inside itself.
class PhaseScope {
 public:
  explicit PhaseScope(const char* phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;
  void add_tokens(int64_t n) { tokens_ += n; }

 private:
  const char* phase_;
  const char* outer_;
  int64_t start_ns_;
  int64_t tokens_ = 0;
  int64_t start_commands_ = 0, start_submits_ = 0, start_waits_ = 0;  // device queue at the start
};

}  // namespace kiln::profiler
