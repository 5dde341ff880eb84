// Softmax on the CPU: splits rows (or one long row) across the thread pool and stages
// f16/bf16 rows through float32 scratch; the SIMD passes are in softmax_kernels.cpp.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <type_traits>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/nn/softmax_kernels.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

// Least elements a thread is given when whole rows are shared out: below this the
// pool's wake-up costs more than the work (a 16K-float softmax takes ~3 us on one Zen 5
// core).
constexpr int64_t kGrainElements = 16384;
// A single row at least this long is split across threads. Measured on 2 Zen 5 cores
// (best of 3000): a 16K-float row takes 3.6 us split vs 3.1 us whole, a 24K row 4.3 us
// vs 5.3 us (the wake-up and barrier cost 1.5-2 us).
constexpr int64_t kSplitRowMinElements = 24576;
// Columns per work item of the strided (inner > 1) path.
constexpr int64_t kColumnBlock = 64;
// Most pieces a split row is cut into (more threads than this leave the rest idle).
constexpr int kMaxParts = 64;

// The block length for a piece of n elements (see softmax_kernels.h).
int64_t block_for(int64_t n) {
  const int64_t spread = (n + kSoftmaxMaxBlocks - 1) / kSoftmaxMaxBlocks;
  return std::max(kSoftmaxBlock, (spread + 63) / 64 * 64);
}

// Softmax of one contiguous row of n >= 1 elements (y may equal x).
template <class T>
void softmax_row(const T* x, T* y, int64_t n, bool log) {
  T block_max[kSoftmaxMaxBlocks];
  const int64_t block = block_for(n);
  const SoftmaxStats row = softmax_reduce(x, log ? nullptr : y, n, block, block_max);
  softmax_finish(x, y, n, block, block_max, row, log);
}

// Rows [r0, r1) of a [rows, dim] problem. `scratch` (dim floats) stages narrow rows.
template <class T>
void softmax_rows(const SoftmaxProblem& p, int64_t r0, int64_t r1, float* scratch) {
  const size_t item = itemsize(p.dtype);
  for (int64_t r = r0; r < r1; ++r) {
    const char* in = static_cast<const char*>(p.in) + r * p.dim * item;
    char* out = static_cast<char*>(p.out) + r * p.dim * item;
    if constexpr (std::is_same_v<T, float>) {
      if (p.dtype != DType::Float32) {
        to_f32(p.dtype, in, scratch, p.dim);
        softmax_row(scratch, scratch, p.dim, p.log);
        from_f32(scratch, p.dtype, out, p.dim);
        continue;
      }
    }
    softmax_row(reinterpret_cast<const T*>(in), reinterpret_cast<T*>(out), p.dim, p.log);
  }
}

// One piece's stats, on its own cache line: pieces write them concurrently.
struct alignas(64) PieceStats {
  SoftmaxStats stats;
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// The row's max and sum from its pieces' (max_k, sum_k): S = sum_k sum_k e^(max_k - M).
SoftmaxStats combine_pieces(const PieceStats* pieces, int count) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  double row_max = kNegInf;
  bool nan = false;
  for (int k = 0; k < count; ++k) {
    nan = nan || std::isnan(pieces[k].stats.sum);
    row_max = std::max(row_max, pieces[k].stats.max);
  }
  double row_sum = 0.0;
  for (int k = 0; k < count; ++k) {
    const SoftmaxStats& st = pieces[k].stats;
    if (st.max != kNegInf) row_sum += st.sum * std::exp(st.max - row_max);
  }
  return {row_max, nan ? std::numeric_limits<double>::quiet_NaN() : row_sum};
}

// Row `r` of p split into `parts` contiguous pieces, one per pool thread, run
// concurrently: each reduces its piece (softmax_reduce), waits at a barrier for the
// others, combines every piece's stats itself (no broadcast, so one barrier), and
// finishes its piece. If the pool runs the chunks inline (nested call), the single
// chunk covers every part as one piece and the barrier is already full.
template <class T>
void softmax_split_row(const SoftmaxProblem& p, int64_t r, int parts, ThreadPool& pool, float* scratch) {
  const size_t item = itemsize(p.dtype);
  const int64_t n = p.dim;
  const char* in = static_cast<const char*>(p.in) + r * n * item;
  char* out = static_cast<char*>(p.out) + r * n * item;
  bool narrow = false;
  if constexpr (std::is_same_v<T, float>) narrow = p.dtype != DType::Float32;
  // Part k covers [bound(k), bound(k + 1)); bounds on 16-element (64-byte) boundaries
  // keep the pieces' stores off each other's cache lines.
  auto bound = [&](int64_t k) { return std::min<int64_t>(n, (n * k / parts + 15) / 16 * 16); };
  PieceStats pieces[kMaxParts];
  for (int k = 0; k < parts; ++k) pieces[k].stats = {-std::numeric_limits<double>::infinity(), 0.0};
  std::atomic<int> arrived{0};

  pool.parallel_for(parts, 1, [&](int64_t b, int64_t e) {
    const int64_t lo = bound(b), len = bound(e) - lo;
    const T* x = reinterpret_cast<const T*>(in) + lo;
    T* y = reinterpret_cast<T*>(out) + lo;
    if (narrow && len > 0) {
      to_f32(p.dtype, in + lo * item, scratch + lo, len);
      x = y = reinterpret_cast<T*>(scratch + lo);
    }
    T block_max[kSoftmaxMaxBlocks];
    const int64_t block = block_for(len);
    if (len > 0) pieces[b].stats = softmax_reduce(x, p.log ? nullptr : y, len, block, block_max);

    arrived.fetch_add(static_cast<int>(e - b), std::memory_order_acq_rel);
    for (int spins = 0; arrived.load(std::memory_order_acquire) < parts; ++spins) {
      if (spins < 4096) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
    if (len == 0) return;
    softmax_finish(x, y, len, block, block_max, combine_pieces(pieces, parts), p.log);
    if (narrow) from_f32(scratch + lo, p.dtype, out + lo * item, len);
  });
}

template <class T>
void softmax_all_rows(const SoftmaxProblem& p, ThreadPool& pool) {
  const bool narrow = std::is_same_v<T, float> && p.dtype != DType::Float32;
  const int threads = pool.num_threads();
  if (p.outer < threads && p.dim >= kSplitRowMinElements && threads > 1 && !ThreadPool::in_parallel_region()) {
    const int parts = std::min(threads, kMaxParts);
    Tensor scratch = narrow ? Tensor::empty({p.dim}, DType::Float32) : Tensor();
    for (int64_t r = 0; r < p.outer; ++r) {
      softmax_split_row<T>(p, r, parts, pool, narrow ? scratch.data<float>() : nullptr);
    }
    return;
  }
  // Whole rows per chunk; chunk c owns scratch row c.
  const int64_t min_rows = std::max<int64_t>(1, kGrainElements / p.dim);
  const int64_t chunks = std::clamp<int64_t>(p.outer / min_rows, 1, threads);
  Tensor scratch = narrow ? Tensor::empty({chunks, p.dim}, DType::Float32) : Tensor();
  pool.parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      softmax_rows<T>(p, p.outer * c / chunks, p.outer * (c + 1) / chunks,
                      narrow ? scratch.data<float>() + c * p.dim : nullptr);
    }
  });
}

template <class T>
void softmax_all_columns(const SoftmaxProblem& p, ThreadPool& pool) {
  const int64_t blocks = (p.inner + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / (p.dim * kColumnBlock));
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  pool.parallel_for(p.outer * blocks, grain, [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t o = it / blocks, j0 = it % blocks * kColumnBlock;
      const int64_t offset = o * p.dim * p.inner + j0;
      softmax_columns(in + offset, out + offset, p.dim, p.inner, std::min(kColumnBlock, p.inner - j0), p.log);
    }
  });
}

}  // namespace

void softmax_cpu(const SoftmaxProblem& p, ThreadPool& pool) {
  if (p.outer == 0 || p.dim == 0 || p.inner == 0) return;
  const bool f64 = p.dtype == DType::Float64;
  const bool narrow_rows = p.inner == 1 && (p.dtype == DType::Float16 || p.dtype == DType::BFloat16);
  KILN_CHECK(p.dtype == DType::Float32 || f64 || narrow_rows, "softmax", "no CPU kernel for {} with inner size {}",
             dtype_name(p.dtype), p.inner);
  if (p.inner == 1) {
    if (f64) {
      softmax_all_rows<double>(p, pool);
    } else {
      softmax_all_rows<float>(p, pool);
    }
  } else if (f64) {
    softmax_all_columns<double>(p, pool);
  } else {
    softmax_all_columns<float>(p, pool);
  }
}

}  // namespace kiln::cpu
