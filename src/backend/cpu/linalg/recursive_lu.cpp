// Recursive LU with partial pivoting (see recursive_lu.h for the contract).
//
// lu(A), A m x n, k = min(m, n), split at n1 ~ k / 2 (a multiple of the leaf width):
//   [A11; A21] (m x n1)  <- lu, recursively (pivots 0..n1)
//   [A12; A22]           <- those row interchanges; A12 <- L11^-1 A12 (triangular
//                           solve); A22 <- A22 - A21 A12 (gemm)
//   A22 ((m-n1) x (n-n1)) <- lu, recursively; its interchanges applied to A21
// Nearly all the flops are in gemm calls (the triangular solve too: by halves, down to
// 16 x 16 blocks applied as their explicit inverse), and the right-hand block's columns
// are independent: its interchanges, solve and gemm are cut into column blocks over the
// pool. Panels of at most kLeafColumns columns go to a plain right-looking kernel
// (LAPACK's getf2) compiled for AVX2/AVX-512 (isa_clones.h): OpenBLAS's calls cost more
// than the arithmetic of such thin blocks.
#include "backend/cpu/linalg/recursive_lu.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>

#include "backend/cpu/linalg/isa_clones.h"
#include "backend/cpu/linalg/linalg_common.h"
#include "backend/cpu/matmul/blas_buffer_guard.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::cpu::linalg {
namespace {

// Panels this narrow (or narrower) go to the leaf kernel. A 256-row complex64 panel of
// 16 columns is 32 KiB, one L1 data cache.
constexpr int64_t kLeafColumns = 16;
// Column blocks of the parallel update are multiples of this (the gemm kernels' widest
// register tile), hold at least kMinChunkMacs multiply-adds (~10 us of single-core
// complex64 gemm at these shapes, well above the pool's wake-up cost), and number at
// most kBlocksPerThread per thread (each block is a gemm call that packs A21 again).
constexpr int64_t kChunkAlign = 8;
constexpr double kMinChunkMacs = 1 << 17;
constexpr int kBlocksPerThread = 2;

// --- OpenBLAS, column-major -------------------------------------------------------

// C (m x n) <- C - A (m x k) B (k x n).
void gemm_subtract(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, -1.0f, a, lda, b, ldb, 1.0f, c, ldc);
}
void gemm_subtract(int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c, int ldc) {
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, -1.0, a, lda, b, ldb, 1.0, c, ldc);
}
void gemm_subtract(int m, int n, int k, const c64* a, int lda, const c64* b, int ldb, c64* c, int ldc) {
  const c64 minus_one(-1), one(1);
  cblas_cgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, &minus_one, a, lda, b, ldb, &one, c, ldc);
}
void gemm_subtract(int m, int n, int k, const c128* a, int lda, const c128* b, int ldb, c128* c, int ldc) {
  const c128 minus_one(-1), one(1);
  cblas_zgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, &minus_one, a, lda, b, ldb, &one, c, ldc);
}

// --- the leaf: getf2 on a thin panel ----------------------------------------------

// First index in [0, count) of the largest abs1, with i?amax's comparisons: the running
// maximum moves only on a strictly larger value, so NaN is skipped unless it comes
// first (and then it stays).
template <typename T>
[[gnu::always_inline]] inline int64_t first_largest_scalar(const T* x, int64_t count) {
  using R = Real<T>;
  R best = abs1(x[0]);
  int64_t at = 0;
  for (int64_t i = 1; i < count; ++i) {
    const R v = abs1(x[i]);
    if (v > best) {
      best = v;
      at = i;
    }
  }
  return at;
}

// The same, fast: the maxima of blocks of 16 in a loop without a carried index (it
// vectorises), compared as the bit patterns of the non-negative abs1 values (which
// order as the values do, NaN above inf: an integer maximum needs no NaN rules), then
// the first position in the first block that holds the maximum. A NaN after the first
// element goes to the scalar loop.
template <typename T>
[[gnu::always_inline]] inline int64_t first_largest(const T* x, int64_t count) {
  using R = Real<T>;
  using Bits = std::conditional_t<sizeof(R) == 4, uint32_t, uint64_t>;
  constexpr Bits kInfinity = static_cast<Bits>(sizeof(R) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  constexpr int64_t kBlock = 16;
  auto key = [](T v) {
    const R a = abs1(v);
    Bits b;
    std::memcpy(&b, &a, sizeof(b));
    return b;
  };
  Bits best = key(x[0]);
  if (best > kInfinity) return 0;
  int64_t best_block = -1;
  int64_t i = 1;
  for (; i + kBlock <= count; i += kBlock) {
    Bits block = 0;
    for (int64_t t = 0; t < kBlock; ++t) {
      const Bits b = key(x[i + t]);
      block = b > block ? b : block;
    }
    if (block > best) {
      best = block;
      best_block = i;
    }
  }
  if (i < count) {
    Bits block = 0;
    for (int64_t t = i; t < count; ++t) {
      const Bits b = key(x[t]);
      block = b > block ? b : block;
    }
    if (block > best) {
      best = block;
      best_block = i;
    }
  }
  if (best_block < 0) return 0;
  if (best > kInfinity) return first_largest_scalar(x, count);
  for (int64_t t = best_block;; ++t) {
    if (key(x[t]) == best) return t;
  }
}

// getf2 on the m x n panel a (lda): pivots (1-based, relative to the panel) and info.
// Row interchanges move only the panel's own columns.
template <typename T>
[[gnu::always_inline]] inline int32_t leaf_lu(T* a, int64_t m, int64_t n, int64_t lda, int32_t* pivots) {
  using R = Real<T>;
  int32_t info = 0;
  const int64_t k = std::min(m, n);
  for (int64_t j = 0; j < k; ++j) {
    T* col = a + j * lda;
    const int64_t p = j + first_largest(col + j, m - j);
    pivots[j] = static_cast<int32_t>(p + 1);
    const T pivot = col[p];
    if (pivot != T(0)) {
      if (p != j) {
        for (int64_t c = 0; c < n; ++c) std::swap(a[j + c * lda], a[p + c * lda]);
      }
      // As getf2: multiply by the reciprocal unless it would overflow.
      if (std::abs(pivot) >= std::numeric_limits<R>::min()) {
        const T r = T(1) / pivot;
        for (int64_t i = j + 1; i < m; ++i) col[i] = mul(col[i], r);
      } else {
        for (int64_t i = j + 1; i < m; ++i) col[i] = col[i] / pivot;
      }
    } else if (info == 0) {
      info = static_cast<int32_t>(j + 1);
    }
    for (int64_t c = j + 1; c < n; ++c) {
      T* dst = a + c * lda;
      const T u = dst[j];
      for (int64_t i = j + 1; i < m; ++i) dst[i] -= mul(col[i], u);
    }
  }
  return info;
}

template <typename T>
int32_t leaf(T* a, int64_t m, int64_t n, int64_t lda, int32_t* pivots) {
  return IsaClones<&leaf_lu<T>>::best()(a, m, n, lda, pivots);
}

// --- the recursion ------------------------------------------------------------------

// Applies the interchanges pivots[begin, end) (1-based rows of a) to columns [0, cols),
// four columns per pass over the pivots: one pivot read and test serve four swaps, and
// the four columns' loads and stores overlap (one column at a time cost twice
// OpenBLAS's laswp).
template <typename T>
void swap_rows(T* a, int64_t lda, int64_t cols, const int32_t* pivots, int64_t begin, int64_t end) {
  int64_t c = 0;
  for (; c + 4 <= cols; c += 4) {
    T* c0 = a + c * lda;
    T* c1 = c0 + lda;
    T* c2 = c1 + lda;
    T* c3 = c2 + lda;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t p = pivots[i] - 1;
      if (p == i) continue;
      std::swap(c0[i], c0[p]);
      std::swap(c1[i], c1[p]);
      std::swap(c2[i], c2[p]);
      std::swap(c3[i], c3[p]);
    }
  }
  for (; c < cols; ++c) {
    T* col = a + c * lda;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t p = pivots[i] - 1;
      if (p != i) std::swap(col[i], col[p]);
    }
  }
}

// B (n x cols) <- L^-1 B for a unit lower L of n <= kLeafColumns, as B <- B - N B0 with
// L^-1 = I - N (N strictly lower, by forward substitution) and B0 a copy of B: one
// gemm per kSolveChunk columns, none of which touches C first (gemm works neither in
// place nor, with beta = 0, without clearing C). OpenBLAS 0.3.21's trsm reaches ~12
// GFLOP/s (complex64) on 16 x 16 blocks, its gemm ~45.
constexpr int64_t kSolveChunk = 128;

template <typename T>
void solve_unit_lower_small(const T* l, int64_t n, int64_t ldl, T* b, int64_t cols, int64_t ldb) {
  T minus_inverse[kLeafColumns * kLeafColumns];  // N = I - L^-1
  T copy[kLeafColumns * kSolveChunk];
  for (int64_t c = 0; c < n; ++c) {
    // Column c of L^-1 solves L x = e_c; N's column is -x below the diagonal.
    T* x = minus_inverse + c * n;
    for (int64_t i = 0; i <= c; ++i) x[i] = T(0);
    for (int64_t i = c + 1; i < n; ++i) x[i] = l[i + c * ldl];
    for (int64_t j = c + 1; j < n; ++j) {
      for (int64_t i = j + 1; i < n; ++i) x[i] -= mul(l[i + j * ldl], x[j]);
    }
  }
  for (int64_t c0 = 0; c0 < cols; c0 += kSolveChunk) {
    const int64_t w = std::min(kSolveChunk, cols - c0);
    for (int64_t c = 0; c < w; ++c) std::copy_n(b + (c0 + c) * ldb, n, copy + c * n);
    gemm_subtract(static_cast<int>(n), static_cast<int>(w), static_cast<int>(n), minus_inverse, static_cast<int>(n),
                  copy, static_cast<int>(n), b + c0 * ldb, static_cast<int>(ldb));
  }
}

// B (n x cols) <- L^-1 B for the unit lower n x n L, by halves down to the leaf width so
// that nearly all of it runs in gemm.
template <typename T>
void solve_unit_lower(const T* l, int64_t n, int64_t ldl, T* b, int64_t cols, int64_t ldb) {
  if (n <= kLeafColumns) {
    solve_unit_lower_small(l, n, ldl, b, cols, ldb);
    return;
  }
  const int64_t h = std::max(kLeafColumns, n / 2 / kLeafColumns * kLeafColumns);
  solve_unit_lower(l, h, ldl, b, cols, ldb);
  gemm_subtract(static_cast<int>(n - h), static_cast<int>(cols), static_cast<int>(h), l + h, static_cast<int>(ldl), b,
                static_cast<int>(ldb), b + h, static_cast<int>(ldb));
  solve_unit_lower(l + h + h * ldl, n - h, ldl, b + h, cols, ldb);
}

// The columns [c0, c1) of the right-hand block [A12; A22] of an m-row matrix whose left
// n1 columns are factored: interchanges, trsm, gemm.
template <typename T>
void update_columns(T* a, int64_t m, int64_t n1, int64_t lda, const int32_t* pivots, int64_t c0, int64_t c1) {
  T* right = a + (n1 + c0) * lda;
  const int64_t cols = c1 - c0;
  swap_rows(right, lda, cols, pivots, 0, n1);
  solve_unit_lower(a, n1, lda, right, cols, lda);
  if (m > n1) {
    const int ld = static_cast<int>(lda);
    gemm_subtract(static_cast<int>(m - n1), static_cast<int>(cols), static_cast<int>(n1), a + n1, ld, right, ld,
                  right + n1, ld);
  }
}

// One update's column blocks, as the team (below) shares them.
struct Update {
  void* a;
  int64_t m, n1, n2, lda;
  const int32_t* pivots;
  int64_t width, count;  // blocks of `width` columns, the last one shorter
  void (*run)(const Update& u, int64_t block);
  std::atomic<int64_t> next{0};  // the next block to claim
  std::atomic<int64_t> done{0};  // blocks finished
};

template <typename T>
void run_block(const Update& u, int64_t b) {
  update_columns(static_cast<T*>(u.a), u.m, u.n1, u.lda, u.pivots, b * u.width, std::min(u.n2, (b + 1) * u.width));
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// The pool's threads for one whole factorisation: the caller runs the recursion and
// posts each large update; the other threads wait spinning (the gaps between updates
// are a leaf or two, tens of microseconds) and claim its column blocks, as does the
// caller, which then waits for the blocks still running. A pool worker parks after
// ~20 us idle and takes 50+ us to wake on a VM, about one block's time: woken per
// update, it arrived when the caller had claimed nearly every block (measured: the
// caller did ~90% of the work). Posted updates are never changed or moved (a fixed
// array, one claim counter each), so a thread that falls behind only finds their
// blocks taken. A thread that loses its core holding a block delays the caller by that
// block: on a machine shared with other work the blocks should stay small.
class Team {
 public:
  explicit Team(int64_t capacity) : updates_(new Update[static_cast<size_t>(capacity)]), capacity_(capacity) {}

  // Runs the update's blocks on this thread and whichever helpers come; returns when all
  // are done.
  template <typename T>
  void run(T* a, int64_t m, int64_t n1, int64_t n2, int64_t lda, const int32_t* pivots, int64_t width,
           int64_t count) {
    const int64_t index = posted_.load(std::memory_order_relaxed);
    KILN_CHECK(index < capacity_, "lu_factor", "internal: more updates than the recursion makes");
    Update& u = updates_[index];
    u.a = a;
    u.m = m;
    u.n1 = n1;
    u.n2 = n2;
    u.lda = lda;
    u.pivots = pivots;
    u.width = width;
    u.count = count;
    u.run = &run_block<T>;
    posted_.store(index + 1, std::memory_order_release);
    work_on(u);
    for (int spins = 1; u.done.load(std::memory_order_acquire) < count; ++spins) {
      cpu_relax();
      if (spins % 256 == 0) std::this_thread::yield();
    }
  }

  // A helper thread: takes part in every update posted until finish().
  void help() {
    int64_t seen = 0;
    int idle = 0;
    for (;;) {
      if (seen < posted_.load(std::memory_order_acquire)) {
        work_on(updates_[seen++]);
        idle = 0;
        continue;
      }
      if (finished_.load(std::memory_order_acquire)) return;
      cpu_relax();
      // On a machine shared with other work, let its threads run while nothing is posted.
      if (++idle % 256 == 0) std::this_thread::yield();
    }
  }

  void finish() { finished_.store(true, std::memory_order_release); }

 private:
  static void work_on(Update& u) {
    for (int64_t b = u.next.fetch_add(1, std::memory_order_relaxed); b < u.count;
         b = u.next.fetch_add(1, std::memory_order_relaxed)) {
      u.run(u, b);
      u.done.fetch_add(1, std::memory_order_release);
    }
  }

  std::unique_ptr<Update[]> updates_;
  int64_t capacity_;
  std::atomic<int64_t> posted_{0};
  std::atomic<bool> finished_{false};
};

// The whole right-hand block [A12; A22] (n2 columns): with a team, in column blocks of
// at least kMinChunkMacs multiply-adds, at most kBlocksPerThread per thread.
template <typename T>
void update_right(Team* team, int threads, T* a, int64_t m, int64_t n1, int64_t n2, int64_t lda,
                  const int32_t* pivots) {
  // Multiply-adds per column: the solve n1^2 / 2, the gemm (m - n1) n1.
  const double per_column = static_cast<double>(n1) * (static_cast<double>(n1) / 2 + static_cast<double>(m - n1));
  const int64_t by_work = static_cast<int64_t>(per_column * static_cast<double>(n2) / kMinChunkMacs);
  const int64_t blocks = std::min<int64_t>({by_work, int64_t{kBlocksPerThread} * threads, ceil_div(n2, kChunkAlign)});
  if (team == nullptr || blocks < 2) {
    update_columns(a, m, n1, lda, pivots, 0, n2);
    return;
  }
  const int64_t width = ceil_div(ceil_div(n2, blocks), kChunkAlign) * kChunkAlign;
  team->run(a, m, n1, n2, lda, pivots, width, ceil_div(n2, width));
}

template <typename T>
int32_t factor(Team* team, int threads, T* a, int64_t m, int64_t n, int64_t lda, int32_t* pivots) {
  const int64_t k = std::min(m, n);
  if (k == 0) return 0;
  if (n <= kLeafColumns) return leaf(a, m, n, lda, pivots);
  if (k <= kLeafColumns) {
    // Wide and short: the leading m x m block by the leaf, then the rest of U.
    const int32_t info = leaf(a, m, k, lda, pivots);
    update_right(team, threads, a, m, k, n - k, lda, pivots);
    return info;
  }
  // Split at a multiple of the leaf width so that the leaves are full panels.
  const int64_t n1 = std::max(kLeafColumns, k / 2 / kLeafColumns * kLeafColumns);
  const int64_t n2 = n - n1;
  const int32_t info_left = factor(team, threads, a, m, n1, lda, pivots);
  update_right(team, threads, a, m, n1, n2, lda, pivots);
  const int32_t info_right = factor(team, threads, a + n1 + n1 * lda, m - n1, n2, lda, pivots + n1);
  const int64_t k2 = std::min(m - n1, n2);
  for (int64_t i = n1; i < n1 + k2; ++i) pivots[i] += static_cast<int32_t>(n1);
  swap_rows(a, lda, n1, pivots, n1, n1 + k2);
  if (info_left != 0) return info_left;
  return info_right != 0 ? info_right + static_cast<int32_t>(n1) : 0;
}

// Updates factor() posts at most: one per call that splits (every call above the leaf
// width, fewer than 2 per leaf) or finishes a short wide block.
int64_t max_updates(int64_t m, int64_t n) { return 2 * ceil_div(std::min(m, n), kLeafColumns) + 2; }

// Whether any update of an m x n factorisation is large enough to split.
bool splits(int64_t m, int64_t n) {
  const int64_t k = std::min(m, n);
  const int64_t n1 = std::max(kLeafColumns, k / 2 / kLeafColumns * kLeafColumns);
  if (k <= kLeafColumns || n <= kLeafColumns) return false;
  const double per_column = static_cast<double>(n1) * (static_cast<double>(n1) / 2 + static_cast<double>(m - n1));
  return per_column * static_cast<double>(n - n1) >= 2 * kMinChunkMacs;
}

}  // namespace

template <typename T>
int32_t recursive_lu(ThreadPool* pool, T* a, int64_t m, int64_t n, int64_t lda, int32_t* pivots) {
  const int threads = pool == nullptr || ThreadPool::in_parallel_region() ? 1 : pool->num_threads();
  if (threads == 1 || !splits(m, n)) return factor<T>(nullptr, 1, a, m, n, lda, pivots);
  Team team(max_updates(m, n));
  int32_t info = 0;
  // The first thread into a chunk runs the recursion, the others help: a helper that
  // waited for a leader which no thread had started yet could wait forever (a chunk no
  // worker claims runs on the caller after its own).
  std::atomic<bool> led{false};
  pool->parallel_for(threads, 1, [&](int64_t, int64_t) {
    if (!led.exchange(true, std::memory_order_acq_rel)) {
      try {
        info = factor(&team, threads, a, m, n, lda, pivots);
      } catch (...) {
        team.finish();
        throw;
      }
      team.finish();
      return;
    }
    const BlasBufferGuard guard;
    team.help();
  });
  return info;
}

// Measured against getrf on one thread (OpenBLAS 0.3.21, Zen 4; docs/bench.md): one leaf
// (n <= 16) beats it by 1.3-2x for every dtype; float32/float64 win at every larger
// size (0.6-0.85 of its time at 20..512), complex64 from 32 (0.8-0.9; at 17..31 the
// few thin BLAS calls cost more than they save); complex128 only from ~384 (0.94), where
// the gemm share is large enough to pay for the leaf, which is slower than OpenBLAS's
// for complex doubles. With more threads the updates also split over the pool.
template <typename T>
bool recursive_lu_pays(int64_t m, int64_t n, int threads) {
  if (n <= kLeafColumns) return true;
  const int64_t k = std::min(m, n);
  if constexpr (!kIsComplex<T>) {
    return true;
  } else if constexpr (sizeof(T) == sizeof(c64)) {
    return k >= 32;
  } else {
    return k >= (threads > 1 ? 128 : 384);
  }
}

#define KILN_RECURSIVE_LU(T)                                                                  \
  template int32_t recursive_lu<T>(ThreadPool*, T*, int64_t, int64_t, int64_t, int32_t*); \
  template bool recursive_lu_pays<T>(int64_t, int64_t, int);
KILN_RECURSIVE_LU(float)
KILN_RECURSIVE_LU(double)
KILN_RECURSIVE_LU(c64)
KILN_RECURSIVE_LU(c128)
#undef KILN_RECURSIVE_LU

}  // namespace kiln::cpu::linalg
