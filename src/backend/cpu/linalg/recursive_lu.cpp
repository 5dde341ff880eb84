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
#include <type_traits>
#include <utility>

#include "backend/cpu/linalg/isa_clones.h"
#include "backend/cpu/linalg/linalg_common.h"
#include "backend/cpu/matmul/blas_buffer_guard.h"
#include "kiln/int_math.h"

namespace kiln::cpu::linalg {
namespace {

// Panels this narrow (or narrower) go to the leaf kernel. A 256-row complex64 panel of
// 16 columns is 32 KiB, one L1 data cache.
constexpr int64_t kLeafColumns = 16;
// Column blocks of the parallel update are multiples of this (the gemm kernels' widest
// register tile), hold at least kMinChunkMacs multiply-adds (~10 us of single-core
// complex64 gemm at these shapes, more than a spinning worker's pick-up), and number at
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
  // No interchange at all (a diagonally dominant matrix): skip the passes over the columns.
  int64_t first = begin;
  while (first < end && pivots[first] - 1 == first) ++first;
  if (first == end) return;
  begin = first;
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

// The whole right-hand block [A12; A22] (n2 columns). With a pool, in column blocks of
// at least kMinChunkMacs multiply-adds, at most kBlocksPerThread per thread, that the
// threads claim one at a time: a worker slow to wake (a parked pool worker takes 50+ us
// on a VM, about a block's time) or one that loses its core to another process leaves
// its share to the others instead of holding the call up by a whole static half.
//
// Tried and dropped: keeping the pool's threads spinning for the whole factorisation
// (a team that claims each update's blocks as the caller posts them, no wake-ups). On
// the shared 2-vCPU machine the spinning helper and the caller often landed on one core
// (the scheduler places a wakee next to its waker when the other core is busy), where
// the spinning took whole time slices from the caller: 256 x 256 complex64 took 2-3x
// getrf's time; with sched_yield in the spin it handed the core to other processes
// instead and missed the updates.
template <typename T>
void update_right(ThreadPool* pool, T* a, int64_t m, int64_t n1, int64_t n2, int64_t lda, const int32_t* pivots) {
  // Multiply-adds per column: the solve n1^2 / 2, the gemm (m - n1) n1.
  const double per_column = static_cast<double>(n1) * (static_cast<double>(n1) / 2 + static_cast<double>(m - n1));
  const int threads = pool == nullptr ? 1 : pool->num_threads();
  const int64_t by_work = static_cast<int64_t>(per_column * static_cast<double>(n2) / kMinChunkMacs);
  const int64_t blocks = std::min<int64_t>({by_work, int64_t{kBlocksPerThread} * threads, ceil_div(n2, kChunkAlign)});
  if (threads == 1 || blocks < 2) {
    update_columns(a, m, n1, lda, pivots, 0, n2);
    return;
  }
  const int64_t width = ceil_div(ceil_div(n2, blocks), kChunkAlign) * kChunkAlign;
  const int64_t count = ceil_div(n2, width);
  std::atomic<int64_t> next{0};
  pool->parallel_for(threads, 1, [&](int64_t, int64_t) {
    const BlasBufferGuard guard;
    for (int64_t b = next.fetch_add(1, std::memory_order_relaxed); b < count;
         b = next.fetch_add(1, std::memory_order_relaxed)) {
      update_columns(a, m, n1, lda, pivots, b * width, std::min(n2, (b + 1) * width));
    }
  });
}

template <typename T>
int32_t factor(ThreadPool* pool, T* a, int64_t m, int64_t n, int64_t lda, int32_t* pivots) {
  const int64_t k = std::min(m, n);
  if (k == 0) return 0;
  if (n <= kLeafColumns) return leaf(a, m, n, lda, pivots);
  if (k <= kLeafColumns) {
    // Wide and short: the leading m x m block by the leaf, then the rest of U.
    const int32_t info = leaf(a, m, k, lda, pivots);
    update_right(pool, a, m, k, n - k, lda, pivots);
    return info;
  }
  // Split at a multiple of the leaf width so that the leaves are full panels.
  const int64_t n1 = std::max(kLeafColumns, k / 2 / kLeafColumns * kLeafColumns);
  const int64_t n2 = n - n1;
  const int32_t info_left = factor(pool, a, m, n1, lda, pivots);
  update_right(pool, a, m, n1, n2, lda, pivots);
  const int32_t info_right = factor(pool, a + n1 + n1 * lda, m - n1, n2, lda, pivots + n1);
  const int64_t k2 = std::min(m - n1, n2);
  for (int64_t i = n1; i < n1 + k2; ++i) pivots[i] += static_cast<int32_t>(n1);
  swap_rows(a, lda, n1, pivots, n1, n1 + k2);
  if (info_left != 0) return info_left;
  return info_right != 0 ? info_right + static_cast<int32_t>(n1) : 0;
}

}  // namespace

template <typename T>
int32_t recursive_lu(ThreadPool* pool, T* a, int64_t m, int64_t n, int64_t lda, int32_t* pivots) {
  if (pool != nullptr && ThreadPool::in_parallel_region()) pool = nullptr;
  return factor(pool, a, m, n, lda, pivots);
}

// Measured against getrf on one thread (OpenBLAS 0.3.21, Zen 4; docs/bench.md): one leaf
// (n <= 16, no BLAS call) takes 0.6-0.8 of its time for every dtype; float32/float64
// win at every larger size (0.6-0.85 at 20..512), complex64 from 32 (0.75-0.9; at
// 17..31 the few thin BLAS calls cost more than they save). complex128 came out even
// (0.95-1.05 at 128..512: OpenBLAS's zgetrf spends less on its panels and interchanges
// than on the other types), so it stays on getrf.
template <typename T>
bool recursive_lu_pays(int64_t m, int64_t n) {
  if (n <= kLeafColumns) return true;
  if constexpr (!kIsComplex<T>) {
    return true;
  } else if constexpr (sizeof(T) == sizeof(c64)) {
    return std::min(m, n) >= 32;
  } else {
    return false;
  }
}

#define KILN_RECURSIVE_LU(T)                                                                  \
  template int32_t recursive_lu<T>(ThreadPool*, T*, int64_t, int64_t, int64_t, int32_t*); \
  template bool recursive_lu_pays<T>(int64_t, int64_t);
KILN_RECURSIVE_LU(float)
KILN_RECURSIVE_LU(double)
KILN_RECURSIVE_LU(c64)
KILN_RECURSIVE_LU(c128)
#undef KILN_RECURSIVE_LU

}  // namespace kiln::cpu::linalg
