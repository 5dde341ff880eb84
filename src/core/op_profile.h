// The op side of the profiler (kiln/profiler.h): an op front end holds an OpProfile
// around its kernel call. Inline, so an op pays one relaxed load while nothing records.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "kiln/tensor.h"

namespace kiln::profiler::detail {

extern std::atomic<bool> g_recording;

int64_t now_ns();
// Adds one call of `op` to the calling thread's current phase.
void record(const char* op, int64_t ns, double bytes, double flops);
// Depth of profiled ops on this thread: only the outermost records.
int& depth();

}  // namespace kiln::profiler::detail

namespace kiln {

// Bytes the tensors hold (their elements, as a kernel reads or writes them).
inline double tensor_bytes(std::initializer_list<const Tensor*> tensors) {
  double bytes = 0;
  for (const Tensor* t : tensors) {
    if (t != nullptr && t->defined()) bytes += static_cast<double>(t->numel()) * static_cast<double>(t->element_size());
  }
  return bytes;
}

// What one call must move and compute.
struct OpCost {
  double bytes = 0;
  double flops = 0;  // multiply-adds count 2
};

// Times the enclosing op while the profiler records. `cost()` returns its OpCost and is
// only called while recording, so it may do some arithmetic.
class OpProfile {
 public:
  template <typename CostFn>
  OpProfile(const char* op, CostFn&& cost) {
    if (!profiler::detail::g_recording.load(std::memory_order_relaxed)) return;
    if (profiler::detail::depth()++ != 0) {
      nested_ = true;
      return;
    }
    op_ = op;
    const OpCost c = cost();
    bytes_ = c.bytes;
    flops_ = c.flops;
    start_ns_ = profiler::detail::now_ns();
  }
  ~OpProfile() {
    if (op_ == nullptr && !nested_) return;
    --profiler::detail::depth();
    if (op_ != nullptr) profiler::detail::record(op_, profiler::detail::now_ns() - start_ns_, bytes_, flops_);
  }
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

 private:
  const char* op_ = nullptr;
  bool nested_ = false;
  double bytes_ = 0, flops_ = 0;
  int64_t start_ns_ = 0;
};

}  // namespace kiln
