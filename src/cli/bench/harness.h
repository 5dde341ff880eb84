// The `kiln bench` harness: timing by medians, buffers rotated so each call reads cold
// memory, and a table that puts every figure next to this run's own roofline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::bench {

struct Timing {
  double median_s = 0;
  double min_s = 0;
  int runs = 0;
};

// Seconds since t0 on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median, minimum and count of a non-empty list of call times.
Timing summarize(std::vector<double> seconds);

// Calls fn(i) for i = 0, 1, ... (a few warm-up calls first) until at least `min_runs`
// calls and `min_seconds` have passed, and returns the median and minimum call time.
Timing measure(const std::function<void(int)>& fn, int min_runs = 30, double min_seconds = 0.3);

// Enough copies of `make()`'s tensors that cycling through them reads memory no cache
// holds: at least `min_total_bytes` in all and at least two copies.
template <typename T>
std::vector<T> rotated_copies(size_t bytes_per_copy, const std::function<T()>& make,
                              size_t min_total_bytes = size_t{768} << 20) {
  size_t copies = bytes_per_copy == 0 ? 1 : (min_total_bytes + bytes_per_copy - 1) / bytes_per_copy;
  if (copies < 2) copies = 2;
  std::vector<T> out;
  out.reserve(copies);
  for (size_t i = 0; i < copies; ++i) out.push_back(make());
  return out;
}

struct Row {
  std::string group;  // e.g. "softmax f32"
  std::string shape;  // e.g. "[1,128256]"
  Timing timing;
  double bytes = 0;   // bytes a call must move (0 when the row is about FLOPs)
  double flops = 0;
  // The reference figure the issue names, as a time per call; absent when none.
  std::optional<double> baseline_s;
  std::string baseline_label;
  std::string target;  // e.g. "<= 10 us", ">= 0.80 of roofline"
  bool target_met = false;
  bool has_target = false;
  // The compute roofline of this row when it is not the table's float32 FMA peak (rows
  // whose kernel runs the bf16 dot instruction use its peak); 0: the table's.
  double peak_gflops = 0;
};

class Table {
 public:
  // peak_gflops: the float32 FMA compute roofline, bf16_dot_gflops: the bf16 dot peak
  // (0 when not measured or absent).
  explicit Table(double roofline_gbps, double peak_gflops = 0, double bf16_dot_gflops = 0)
      : roofline_gbps_(roofline_gbps), peak_gflops_(peak_gflops), bf16_dot_gflops_(bf16_dot_gflops) {}
  void add(Row row) { rows_.push_back(std::move(row)); }
  double roofline_gbps() const { return roofline_gbps_; }
  double peak_gflops() const { return peak_gflops_; }
  double bf16_dot_gflops() const { return bf16_dot_gflops_; }
  // GB/s of a row (0 without bytes) and its fraction of the roofline.
  double gbps(const Row& r) const;
  double roofline_fraction(const Row& r) const;
  std::string format() const;
  const std::vector<Row>& rows() const { return rows_; }

 private:
  double roofline_gbps_;
  double peak_gflops_;
  double bf16_dot_gflops_;
  std::vector<Row> rows_;
};

// A family of rows: runs its cases and adds them to the table. `quick` asks for fewer
// shapes and shorter timing (used by tests of the harness itself).
struct Suite {
  std::string name;
  std::string description;
  std::function<void(ThreadPool&, Table&, bool quick)> run;
};

// Suites register themselves at static-initialisation time.
std::vector<Suite>& registry();
struct Registrar {
  explicit Registrar(Suite s) { registry().push_back(std::move(s)); }
};

}  // namespace kiln::bench
