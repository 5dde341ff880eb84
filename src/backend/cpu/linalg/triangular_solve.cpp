// Batched triangular solve (linalg.solve_triangular), any strides.
//
// Two paths, both solving left systems only: a right solve X op(A) = B is the left solve
// Aᵀ Xᵀ = Bᵀ, the same problem with A's and X's row and column strides swapped and the
// triangle flipped.
//  - n <= 64 (the hybrid models' chunked prefill: unit-lower 16/32/64 blocks, 8+
//    right-hand sides): each (matrix, panel of W right-hand-side columns) task
//    substitutes with the panel's W columns as SIMD lanes. float32/float64 take the
//    register-blocked kernel of triangular_panel.cpp, which reads a row-major 16/32/64
//    A in place (an upper solve is a lower one walked backwards; other layouts are
//    packed once per matrix) and X in place when a
//    panel's columns are contiguous; complex types pack A row-major and the panel into
//    scratch for the generic loop below. A stays in L1. OpenBLAS's trsm pays a call,
//    its own packing and a thread check per tiny matrix, which costs more than the
//    solve at these sizes.
//  - larger n: OpenBLAS's blocked trsm (its gemm-based update is the right tool once A
//    leaves L1), on A and X in place when they are row- or column-major, else on packed
//    copies.
#include <cblas.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/linalg/isa_clones.h"
#include "backend/cpu/linalg/linalg_common.h"
#include "backend/cpu/linalg/linalg_kernels.h"
#include "backend/cpu/linalg/triangular_panel.h"
#include "backend/cpu/matmul/blas.h"
#include "backend/cpu/matmul/blas_buffer_guard.h"
#include "kiln/int_math.h"

namespace kiln::cpu::linalg {
namespace {

constexpr int64_t kSmallOrder = 64;

struct Layout {
  int64_t batch_stride, row_stride, col_stride;
};

// Right-hand-side columns per register panel: 64 bytes of accumulators (one AVX-512
// register, two AVX2 ones) per row.
template <typename T>
constexpr int kPanel = 64 / sizeof(T) < 4 ? 4 : 64 / sizeof(T);

// Packs A row-major (n x n) and the reciprocals of its diagonal.
template <typename T>
void pack_triangle(const T* a, const Layout& la, int64_t n, bool upper, bool unit, T* packed, T* rdiag) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j0 = upper ? i : 0;
    const int64_t j1 = upper ? n : i + 1;
    for (int64_t j = j0; j < j1; ++j) packed[i * n + j] = a[i * la.row_stride + j * la.col_stride];
    rdiag[i] = unit ? T(1) : T(1) / packed[i * n + i];
  }
}

template <typename T, int W>
[[gnu::always_inline]] inline void substitute_panel(const T* a, const T* rdiag, T* x, int64_t n, bool upper,
                                                    bool unit) {
  for (int64_t step = 0; step < n; ++step) {
    const int64_t i = upper ? n - 1 - step : step;
    // Four partial sums over j (j mod 4) keep four independent chains in flight: one
    // chain would wait a full add latency per term.
    T acc[W], part[3][W];
    for (int w = 0; w < W; ++w) {
      acc[w] = x[i * W + w];
      part[0][w] = part[1][w] = part[2][w] = T(0);
    }
    const T* ai = a + i * n;
    const int64_t j0 = upper ? i + 1 : 0;
    const int64_t j1 = upper ? n : i;
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) {
      const T a0 = ai[j], a1 = ai[j + 1], a2 = ai[j + 2], a3 = ai[j + 3];
      const T *x0 = x + j * W, *x1 = x0 + W, *x2 = x1 + W, *x3 = x2 + W;
      for (int w = 0; w < W; ++w) {
        acc[w] -= mul(a0, x0[w]);
        part[0][w] -= mul(a1, x1[w]);
        part[1][w] -= mul(a2, x2[w]);
        part[2][w] -= mul(a3, x3[w]);
      }
    }
    for (; j < j1; ++j) {
      const T aij = ai[j];
      const T* xj = x + j * W;
      for (int w = 0; w < W; ++w) acc[w] -= mul(aij, xj[w]);
    }
    for (int w = 0; w < W; ++w) acc[w] += (part[0][w] + part[1][w]) + part[2][w];
    if (!unit) {
      const T r = rdiag[i];
      for (int w = 0; w < W; ++w) acc[w] = mul(acc[w], r);
    }
    for (int w = 0; w < W; ++w) x[i * W + w] = acc[w];
  }
}

// The substitution compiled for AVX2 and AVX-512 as well as the baseline, picked once at
// run time (isa_clones.h): the panel loops are plain C++ that the compiler vectorises.
using PanelFn = void (*)(const void* a, const void* rdiag, void* x, int64_t n, bool upper, bool unit);

template <typename T, int W>
[[gnu::always_inline]] inline void substitute_erased(const void* a, const void* r, void* x, int64_t n, bool upper,
                                                     bool unit) {
  substitute_panel<T, W>(static_cast<const T*>(a), static_cast<const T*>(r), static_cast<T*>(x), n, upper, unit);
}

template <typename T, int W>
PanelFn panel_kernel() {
  return IsaClones<&substitute_erased<T, W>>::best();
}

// Tasks per pool chunk: about 4096 multiply-adds of A's triangle each.
int64_t small_grain(int64_t n) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * n / 2)); }

template <typename T, int W>
void solve_small(const ExecutionContext& ctx, const TriangularSolveProblem& p, const Layout& la, const Layout& lx,
                 bool upper) {
  const int64_t n = p.n;
  const int64_t panels = ceil_div(p.nrhs, int64_t{W});
  const int64_t tasks = checked_mul(p.batch, panels, "solve_triangular");
  const T* a = static_cast<const T*>(p.a);
  T* x = static_cast<T*>(p.x);
  const int64_t grain = small_grain(n);
  const PanelFn substitute = panel_kernel<T, W>();
  ctx.pool().parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    T* packed = ctx.scratch_of<T>(0, n * n + n + n * W);
    T* rdiag = packed + n * n;
    T* panel = rdiag + n;
    int64_t packed_matrix = -1;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / panels;
      const int64_t c0 = (t % panels) * W;
      const int64_t cols = std::min<int64_t>(W, p.nrhs - c0);
      // Two batch entries that share A (a broadcast) share the packed copy too.
      const int64_t a_offset = b * la.batch_stride;
      if (a_offset != packed_matrix) {
        pack_triangle(a + a_offset, la, n, upper, p.unitriangular, packed, rdiag);
        packed_matrix = a_offset;
      }
      T* xb = x + b * lx.batch_stride + c0 * lx.col_stride;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < cols; ++c) panel[i * W + c] = xb[i * lx.row_stride + c * lx.col_stride];
        for (int64_t c = cols; c < W; ++c) panel[i * W + c] = T(0);
      }
      substitute(packed, rdiag, panel, n, upper, p.unitriangular);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < cols; ++c) xb[i * lx.row_stride + c * lx.col_stride] = panel[i * W + c];
      }
    }
  });
}

// Prefetches the cache lines of a row-major triangle (other layouts are left to the
// hardware prefetchers).
template <typename T>
void prefetch_triangle(const T* a, const Layout& la, int64_t n, bool upper) {
  if (la.col_stride != 1) return;
  constexpr int64_t kLine = 64 / sizeof(T);
  for (int64_t i = 0; i < n; ++i) {
    const T* row = a + i * la.row_stride;
    const int64_t j0 = upper ? i : 0, j1 = upper ? n - 1 : i;
    for (int64_t j = j0; j <= j1; j += kLine) __builtin_prefetch(row + j, 0, 3);
    __builtin_prefetch(row + j1, 0, 3);
  }
}

// Copies the lower triangle (its diagonal too unless `unit`) of the n x n matrix with
// L(i, j) = a[i * a_row + j * a_col] into rows of kPackedRowStride.
template <typename T>
void pack_lower(const T* a, int64_t a_row, int64_t a_col, int64_t n, bool unit, T* packed) {
  for (int64_t i = 0; i < n; ++i) {
    const T* row = a + i * a_row;
    T* out = packed + i * kPackedRowStride;
    const int64_t last = unit ? i : i + 1;
    if (a_col == 1) std::copy(row, row + last, out);
    else for (int64_t j = 0; j < last; ++j) out[j] = row[j * a_col];
  }
}

// float32/float64, n <= 64: the register-blocked panel kernel (triangular_panel.h).
template <typename T>
void solve_small_real(const ExecutionContext& ctx, const TriangularSolveProblem& p, const Layout& la,
                      const Layout& lx, bool upper) {
  const int64_t n = p.n;
  // A narrow panel when it holds every right-hand side (no lanes spent on padding), a
  // double one when there are enough right-hand sides to fill it.
  const int64_t wide_lanes = panel_lanes(PanelWidth::kWide, T{});
  const PanelWidth width = p.nrhs <= panel_lanes(PanelWidth::kNarrow, T{}) ? PanelWidth::kNarrow
                           : p.nrhs >= 2 * wide_lanes                     ? PanelWidth::kDouble
                                                                          : PanelWidth::kWide;
  const int64_t W = panel_lanes(width, T{});
  const int64_t panels = ceil_div(p.nrhs, W);
  const int64_t tasks = checked_mul(p.batch, panels, "solve_triangular");
  const T* a = static_cast<const T*>(p.a);
  T* x = static_cast<T*>(p.x);
  // An upper solve is the lower one with rows and columns taken in reverse order.
  const int64_t a_row = upper ? -la.row_stride : la.row_stride;
  const int64_t a_col = upper ? -la.col_stride : la.col_stride;
  const int64_t a_first = upper ? (n - 1) * (la.row_stride + la.col_stride) : 0;
  // Row-major 16/32/64 blocks are read in place; other layouts are packed once per
  // matrix per task range.
  const bool a_in_place = panel_reads_in_place(a_row, a_col);
  const int64_t packed_elems = a_in_place ? 0 : n * kPackedRowStride;
  ctx.pool().parallel_for(tasks, small_grain(n), [&](int64_t begin, int64_t end) {
    T* panel = ctx.scratch_of<T>(0, packed_elems + n * W);
    T* packed = panel + n * W;
    int64_t packed_matrix = -1;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / panels;
      const int64_t c0 = (t % panels) * W;
      const int64_t cols = std::min<int64_t>(W, p.nrhs - c0);
      T* xb = x + b * lx.batch_stride + c0 * lx.col_stride;
      const bool in_place = lx.col_stride == 1 && cols == W;
      T* rows = xb;
      int64_t row_step = lx.row_stride;
      if (!in_place) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t c = 0; c < cols; ++c) panel[i * W + c] = xb[i * lx.row_stride + c * lx.col_stride];
          for (int64_t c = cols; c < W; ++c) panel[i * W + c] = T(0);
        }
        rows = panel;
        row_step = W;
      }
      if (upper) {
        rows += (n - 1) * row_step;
        row_step = -row_step;
      }
      const T* ab = a + b * la.batch_stride + a_first;
      if (a_in_place) {
        // The next task's matrix, when it is another one: its triangle is read from
        // memory while this one is solved (a batch of blocks is usually cold: it was
        // just written by the caller).
        if (t + 1 < end && (t + 1) / panels != b) prefetch_triangle(a + (b + 1) * la.batch_stride, la, n, upper);
        solve_lower_panel(width, ab, a_row, a_col, rows, row_step, n, p.unitriangular);
      } else {
        // Two tasks on one matrix (panels of its right-hand sides, or a broadcast A)
        // share the packed copy.
        if (b * la.batch_stride != packed_matrix) {
          pack_lower(ab, a_row, a_col, n, p.unitriangular, packed);
          packed_matrix = b * la.batch_stride;
        }
        solve_lower_panel(width, packed, kPackedRowStride, 1, rows, row_step, n, p.unitriangular);
      }
      if (!in_place) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t c = 0; c < cols; ++c) xb[i * lx.row_stride + c * lx.col_stride] = panel[i * W + c];
        }
      }
    }
  });
}

// How BLAS can read a matrix in place: column-major (unit row stride) or row-major
// (unit column stride) with a leading dimension covering the other extent; kNone when
// neither (it is then packed).
enum class Storage { kColumnMajor, kRowMajor, kNone };

Storage storage_of(const Layout& l, int64_t rows, int64_t cols) {
  const int64_t int_max = std::numeric_limits<int>::max();
  if (l.row_stride == 1 && l.col_stride >= std::max<int64_t>(1, rows) && l.col_stride <= int_max)
    return Storage::kColumnMajor;
  if (l.col_stride == 1 && l.row_stride >= std::max<int64_t>(1, cols) && l.row_stride <= int_max)
    return Storage::kRowMajor;
  return Storage::kNone;
}

// One trsm: op(A) X = B, left side, X (n x cols) in place, both described to CBLAS in
// `order`; `transpose` reads A transposed (A stored in the other order).
template <typename T>
void trsm(CBLAS_ORDER order, bool upper, bool transpose, bool unit, int n, int cols, const T* a, int lda, T* x,
          int ldx) {
  const BlasBufferGuard guard;
  const auto uplo = upper ? CblasUpper : CblasLower;
  const auto trans = transpose ? CblasTrans : CblasNoTrans;
  const auto diag = unit ? CblasUnit : CblasNonUnit;
  if constexpr (std::is_same_v<T, float>) {
    cblas_strsm(order, CblasLeft, uplo, trans, diag, n, cols, 1.0f, a, lda, x, ldx);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dtrsm(order, CblasLeft, uplo, trans, diag, n, cols, 1.0, a, lda, x, ldx);
  } else {
    const T one(1);
    if constexpr (std::is_same_v<T, c64>) {
      cblas_ctrsm(order, CblasLeft, uplo, trans, diag, n, cols, &one, a, lda, x, ldx);
    } else {
      cblas_ztrsm(order, CblasLeft, uplo, trans, diag, n, cols, &one, a, lda, x, ldx);
    }
  }
}

// Large n: OpenBLAS's blocked trsm, on A and X in place when their strides allow (the
// usual case: kiln's front end hands over contiguous X), else on packed copies. A
// stored in the order opposite to X's is read transposed with the triangle flipped.
template <typename T>
void solve_large(const ExecutionContext& ctx, const TriangularSolveProblem& p, const Layout& la, const Layout& lx,
                 bool upper) {
  ensure_blas_single_threaded();
  const int64_t n = p.n;
  const Storage x_storage = storage_of(lx, n, p.nrhs);
  const bool x_packed = x_storage == Storage::kNone;
  const bool column_major = x_storage != Storage::kRowMajor;
  const Storage a_storage = storage_of(la, n, n);
  const bool a_packed = a_storage == Storage::kNone;
  const bool a_transposed = !a_packed && (a_storage == Storage::kColumnMajor) != column_major;
  const bool a_upper = a_transposed ? !upper : upper;
  const int a_ld = a_packed ? static_cast<int>(n)
                            : static_cast<int>(a_storage == Storage::kColumnMajor ? la.col_stride : la.row_stride);
  // Column blocks let one large system use every thread.
  const int64_t threads = ctx.num_threads();
  const int64_t blocks_per_matrix = p.batch >= threads ? 1 : std::min<int64_t>(ceil_div(threads, p.batch), p.nrhs);
  const int64_t block_cols = ceil_div(p.nrhs, blocks_per_matrix);
  const int64_t tasks = checked_mul(p.batch, blocks_per_matrix, "solve_triangular");
  const int64_t a_elems = a_packed ? checked_mul(n, n, "solve_triangular") : 0;
  const int64_t x_elems = x_packed ? checked_mul(n, block_cols, "solve_triangular") : 0;
  const T* a = static_cast<const T*>(p.a);
  T* x = static_cast<T*>(p.x);
  ctx.pool().parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
    T* scratch = ctx.scratch_of<T>(0, checked_add(std::max<int64_t>(a_elems, 1), x_elems, "solve_triangular"));
    T* panel = scratch + std::max<int64_t>(a_elems, 1);
    int64_t packed_matrix = -1;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / blocks_per_matrix;
      const int64_t c0 = (t % blocks_per_matrix) * block_cols;
      const int64_t cols = std::min<int64_t>(block_cols, p.nrhs - c0);
      if (cols <= 0) continue;
      const int64_t a_offset = b * la.batch_stride;
      const T* ab = a + a_offset;
      if (a_packed) {
        if (a_offset != packed_matrix) {
          for (int64_t j = 0; j < n; ++j) {
            for (int64_t i = 0; i < n; ++i) scratch[i + j * n] = ab[i * la.row_stride + j * la.col_stride];
          }
          packed_matrix = a_offset;
        }
        ab = scratch;
      }
      T* xb = x + b * lx.batch_stride + c0 * lx.col_stride;
      if (x_packed) {
        for (int64_t c = 0; c < cols; ++c) {
          for (int64_t i = 0; i < n; ++i) panel[i + c * n] = xb[i * lx.row_stride + c * lx.col_stride];
        }
        trsm(CblasColMajor, a_upper, a_transposed, p.unitriangular, static_cast<int>(n), static_cast<int>(cols), ab,
             a_ld, panel, static_cast<int>(n));
        for (int64_t c = 0; c < cols; ++c) {
          for (int64_t i = 0; i < n; ++i) xb[i * lx.row_stride + c * lx.col_stride] = panel[i + c * n];
        }
      } else {
        const int x_ld = static_cast<int>(column_major ? lx.col_stride : lx.row_stride);
        trsm(column_major ? CblasColMajor : CblasRowMajor, a_upper, a_transposed, p.unitriangular,
             static_cast<int>(n), static_cast<int>(cols), ab, a_ld, xb, x_ld);
      }
    }
  });
}

}  // namespace

void triangular_solve_cpu(const ExecutionContext& ctx, const TriangularSolveProblem& p) {
  if (p.batch == 0 || p.n == 0 || p.nrhs == 0) return;
  Layout la{p.a_batch_stride, p.a_row_stride, p.a_col_stride};
  Layout lx{p.x_batch_stride, p.x_row_stride, p.x_col_stride};
  bool upper = p.upper;
  if (!p.left) {
    std::swap(la.row_stride, la.col_stride);
    std::swap(lx.row_stride, lx.col_stride);
    upper = !upper;
  }
  dispatch(p.dtype, "solve_triangular", [&](auto tag) {
    using T = decltype(tag);
    // Few right-hand sides (the chunked prefill's 8) take a half-width panel, so no
    // lanes are spent on padding.
    if (p.n > kSmallOrder) solve_large<T>(ctx, p, la, lx, upper);
    else if constexpr (!kIsComplex<T>) solve_small_real<T>(ctx, p, la, lx, upper);
    else if (p.nrhs <= kPanel<T> / 2) solve_small<T, kPanel<T> / 2>(ctx, p, la, lx, upper);
    else solve_small<T, kPanel<T>>(ctx, p, la, lx, upper);
  });
}

}  // namespace kiln::cpu::linalg
