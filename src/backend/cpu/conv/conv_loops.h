// Loop scaffolding the CPU conv kernels share (internal to src/backend/cpu/conv): the
// float/double pick, the walk over the input rows and taps an output row reads, and the weight
// gradient's fixed chunks with one partial each.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/conv.h"
#include "backend/cpu/conv/conv_pack.h"

namespace kiln::cpu::conv {

// f32(ctx, a) or f64(ctx, a) by the problem's dtype (the front end admits only these two).
template <typename Args>
void by_dtype(const ExecutionContext& ctx, const Args& a, void (*f32)(const ExecutionContext&, const Args&),
              void (*f64)(const ExecutionContext&, const Args&)) {
  (a.g.dtype == DType::Float64 ? f64 : f32)(ctx, a);
}

// Calls f(input row, tap base) for every tap (a, b) of the leading two kernel dims that
// puts output row (od, oh) on an existing input row: input row = id * in[1] + ih, tap
// base = (a * kernel[1] + b) * kernel[2] (the flat tap of (a, b, 0)).
template <typename F>
void for_each_input_row(const backend::ConvGeometry& g, int64_t od, int64_t oh, F&& f) {
  for (int64_t a = 0; a < g.kernel[0]; ++a) {
    const int64_t id = od * g.stride[0] + a * g.dilation[0] - g.padding[0];
    if (id < 0 || id >= g.in[0]) continue;
    for (int64_t b = 0; b < g.kernel[1]; ++b) {
      const int64_t ih = oh * g.stride[1] + b * g.dilation[1] - g.padding[1];
      if (ih < 0 || ih >= g.in[1]) continue;
      f(id * g.in[1] + ih, (a * g.kernel[1] + b) * g.kernel[2]);
    }
  }
}

// Calls f(e, off, lo, hi) for each tap e of the last kernel dim that reaches the input
// from some output column: output columns [lo, hi) read input column ow * stride + off.
template <typename F>
void for_each_column_tap(const backend::ConvGeometry& g, F&& f) {
  for (int64_t e = 0; e < g.kernel[2]; ++e) {
    const int64_t off = e * g.dilation[2] - g.padding[2];
    int64_t lo, hi;
    valid_range(0, g.out[2], g.stride[2], off, g.in[2], &lo, &hi);
    if (lo < hi) f(e, off, lo, hi);
  }
}

// The weight gradient's tasks [0, tasks) in min(threads, tasks) fixed chunks (not one
// per thread), each summing into its own zeroed partial of partial_size values, so the
// caller can add the partials in chunk order: deterministic for a thread count, no
// atomics. run(task_begin, task_end, partial) does one chunk. Returns the partials,
// chunk after chunk; `chunks` receives their count. tasks must be > 0.
template <typename T, typename Run>
std::vector<T> chunked_partials(const ExecutionContext& ctx, int64_t tasks, int64_t partial_size, int64_t* chunks,
                                Run&& run) {
  const int64_t n = std::min<int64_t>(ctx.num_threads(), tasks);
  *chunks = n;
  std::vector<T> partial(static_cast<size_t>(n * partial_size), T(0));
  ctx.pool().parallel_for(n, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk)
      run(tasks * chunk / n, tasks * (chunk + 1) / n, partial.data() + chunk * partial_size);
  });
  return partial;
}

}  // namespace kiln::cpu::conv
