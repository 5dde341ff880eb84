// RMSNorm and LayerNorm over rows on the thread pool: each thread works in its own
// scratch of the execution context (kept across calls, so a call allocates nothing once
// it has grown), where groups of rows are widened to the compute dtype,
// normalised by the SIMD kernels of norm_kernels.cpp, rounded where the variant says,
// and narrowed into the output.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/elementwise/activation_fused_kernels.h"
#include "backend/cpu/cast/cast.h"
#include "backend/cpu/nn/norm_kernels.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

// Least elements a thread is given (a 16K-element row takes a few microseconds).
constexpr int64_t kGrainElements = 16384;

template <class T>
constexpr DType dtype_of() {
  return std::is_same_v<T, double> ? DType::Float64 : DType::Float32;
}

// n values of dtype `src_dtype` at src, as T: in place when they already are T,
// else converted into `buf`.
template <class T>
const T* as_compute(DType src_dtype, const void* src, T* buf, int64_t n) {
  if (src_dtype == dtype_of<T>()) return static_cast<const T*>(src);
  cast_strided(src_dtype, src, static_cast<int64_t>(itemsize(src_dtype)), dtype_of<T>(), buf, sizeof(T), n);
  return buf;
}

// Where a group's result is computed: straight into the output when it has the compute
// dtype, else into `buf` (then store_row narrows it).
template <class T>
T* result_row(DType out_dtype, void* out, T* buf) {
  return out_dtype == dtype_of<T>() ? static_cast<T*>(out) : buf;
}

template <class T>
void store_row(const T* y, DType out_dtype, void* out, int64_t n) {
  if (out_dtype == dtype_of<T>()) return;  // computed in place
  cast_strided(dtype_of<T>(), y, sizeof(T), out_dtype, out, static_cast<int64_t>(itemsize(out_dtype)), n);
}

// Rounds v to `dtype` and back (HF's `.to(input_dtype)` inside the norm), through
// `tmp` (n values of up to 8 bytes).
template <class T>
void round_through(T* v, int64_t n, DType dtype, void* tmp) {
  if (dtype == dtype_of<T>()) return;
  cast_strided(dtype_of<T>(), v, sizeof(T), dtype, tmp, static_cast<int64_t>(itemsize(dtype)), n);
  cast_strided(dtype, tmp, static_cast<int64_t>(itemsize(dtype)), dtype_of<T>(), v, sizeof(T), n);
}

// Rows are handled in groups of about this many values: the dtype conversions and
// kernel calls (each with its own fixed cost) then run once per group instead of once
// per row, which matters for many short rows (q_norm, 32 heads of 128 per token: 3.0
// -> 1.8 us in bfloat16 and 1.55 -> 0.8 us in float32, measured on Zen 5).
constexpr int64_t kGroupElements = 8192;

// A group's scratch, in the running thread's scratch of the context: two groups of T
// (converted input, work) and one of up to 8-byte values (for rounding through a narrow
// dtype).
struct Scratch {
  const ExecutionContext& ctx;
  int64_t group_values;
  size_t t_size;

  // The running thread's buffer (valid for the group being run).
  char* block() const {
    return static_cast<char*>(ctx.scratch_elements(0, group_values, 2 * t_size + 8));
  }
  template <class T>
  static T* values(char* block, int64_t group_values, int which) {
    return reinterpret_cast<T*>(block) + which * group_values;
  }
  void* narrow(char* block) const { return block + 2 * group_values * static_cast<int64_t>(t_size); }
};

// Runs group_fn(first_row, row_count, chunk) over groups of at most group_rows rows,
// the rows split into `chunks` contiguous chunks, one per thread.
template <class GroupFn>
void for_each_group(ThreadPool& pool, int64_t rows, int64_t chunks, int64_t group_rows, GroupFn&& group_fn) {
  pool.parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t end = rows * (c + 1) / chunks;
      for (int64_t r = rows * c / chunks; r < end; r += group_rows) group_fn(r, std::min(group_rows, end - r), c);
    }
  });
}

int64_t chunk_count(ThreadPool& pool, int64_t rows, int64_t cols) {
  const int64_t min_rows = std::max<int64_t>(1, kGrainElements / cols);
  return std::clamp<int64_t>(rows / min_rows, 1, pool.num_threads());
}

template <class T>
void rms_norm_rows(const RmsNormProblem& p, const ExecutionContext& ctx) {
  ThreadPool& pool = ctx.pool();
  const int64_t cols = p.cols;
  const int64_t chunks = chunk_count(pool, p.rows, cols);
  const int64_t group_rows = std::max<int64_t>(1, kGroupElements / cols);
  const Scratch scratch{ctx, std::min(group_rows, p.rows) * cols, sizeof(T)};
  const size_t in_item = itemsize(p.in_dtype), out_item = itemsize(p.out_dtype);
  const T* w = static_cast<const T*>(p.weight);
  for_each_group(pool, p.rows, chunks, group_rows, [&](int64_t r0, int64_t count, int64_t) {
    const int64_t n = count * cols;
    char* block = scratch.block();
    T* work = Scratch::values<T>(block, scratch.group_values, 1);
    void* tmp = scratch.narrow(block);
    const T* x = as_compute<T>(p.in_dtype, static_cast<const char*>(p.in) + r0 * cols * in_item,
                               Scratch::values<T>(block, scratch.group_values, 0), n);
    void* out = static_cast<char*>(p.out) + r0 * cols * out_item;
    T* y = result_row<T>(p.out_dtype, out, work);
    if (p.kind == RmsNormKind::ScaleThenWeight) {
      rms_normalize_rows(x, count, cols, p.eps, w, y);
    } else {
      rms_normalize_rows(x, count, cols, p.eps, static_cast<const T*>(nullptr), work);
      round_through(work, n, p.in_dtype, tmp);
      if (p.kind == RmsNormKind::RoundThenWeight) {
        mul_rows(work, w, y, count, cols);
      } else {
        mul_rows(work, w, work, count, cols);
        round_through(work, n, p.weighted_dtype, tmp);
        mul_silu(work, static_cast<const T*>(p.gate) + r0 * cols, y, n);
      }
    }
    store_row(y, p.out_dtype, out, n);
  });
}

template <class T>
void layer_norm_rows(const LayerNormProblem& p, const ExecutionContext& ctx) {
  ThreadPool& pool = ctx.pool();
  const int64_t cols = p.cols;
  const int64_t chunks = chunk_count(pool, p.rows, cols);
  const int64_t group_rows = std::max<int64_t>(1, kGroupElements / cols);
  const Scratch scratch{ctx, std::min(group_rows, p.rows) * cols, sizeof(T)};
  const size_t item = itemsize(p.in_dtype);
  const T* w = static_cast<const T*>(p.weight);
  const T* b = static_cast<const T*>(p.bias);
  for_each_group(pool, p.rows, chunks, group_rows, [&](int64_t r0, int64_t count, int64_t) {
    const int64_t n = count * cols;
    char* block = scratch.block();
    const T* x = as_compute<T>(p.in_dtype, static_cast<const char*>(p.in) + r0 * cols * item,
                               Scratch::values<T>(block, scratch.group_values, 0), n);
    void* out = static_cast<char*>(p.out) + r0 * cols * item;
    T* y = result_row<T>(p.in_dtype, out, Scratch::values<T>(block, scratch.group_values, 1));
    layer_normalize_rows(x, count, cols, p.eps, w, b, y);
    store_row(y, p.in_dtype, out, n);
  });
}

void check_compute(DType compute, const char* op) {
  KILN_CHECK(compute == DType::Float32 || compute == DType::Float64, op, "no CPU kernel computing in {}",
             dtype_name(compute));
}

}  // namespace

void rms_norm_cpu(const RmsNormProblem& p, const ExecutionContext& ctx) {
  check_compute(p.compute, "rms_norm");
  if (p.rows == 0 || p.cols == 0) return;
  if (p.compute == DType::Float64) {
    rms_norm_rows<double>(p, ctx);
  } else {
    rms_norm_rows<float>(p, ctx);
  }
}

void layer_norm_cpu(const LayerNormProblem& p, const ExecutionContext& ctx) {
  check_compute(p.compute, "layer_norm");
  if (p.rows == 0 || p.cols == 0) return;
  if (p.compute == DType::Float64) {
    layer_norm_rows<double>(p, ctx);
  } else {
    layer_norm_rows<float>(p, ctx);
  }
}

}  // namespace kiln::cpu
