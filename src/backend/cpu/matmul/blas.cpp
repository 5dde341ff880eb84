// Batched GEMM over OpenBLAS (float32/64, complex64/128) and the integer loop, with
// the work split over kiln's pool (see the threading note in blas.h), and the typed BLAS
// calls every CPU kernel multiplies through.
#include "backend/cpu/matmul/blas.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <complex>
#include <cstring>
#include <mutex>
#include <optional>

#include "backend/cpu/matmul/blas_buffer_guard.h"
#include "backend/cpu/matmul/gemm_int.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::cpu {

namespace {

// Multiply-adds a task should have at least before it is worth handing to a thread:
// ~0.1 ms of single-core float work, well above the pool's wake-up cost.
constexpr double kMinTaskWork = 1 << 20;
// Panels are cut at multiples of this many rows (or columns), which keeps OpenBLAS's
// micro-kernels (at most 16 wide on AVX-512) on full tiles except at the edge.
constexpr int64_t kPanelAlign = 16;

// How OpenBLAS sees a matrix: row-major (CblasNoTrans) or column-major, i.e. the row-major
// transpose (CblasTrans), with leading dimension ld.
struct Layout {
  bool transposed;
  int ld;
};

std::optional<Layout> blas_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (rows > INT_MAX || cols > INT_MAX) return std::nullopt;
  // A dim of extent 1 is never stepped along, so its stride is free: pick the smallest
  // leading dimension BLAS accepts.
  const int64_t row_ld = rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride;
  if ((cols <= 1 || col_stride == 1) && row_ld >= std::max<int64_t>(cols, 1) && row_ld <= INT_MAX) {
    return Layout{false, static_cast<int>(row_ld)};
  }
  const int64_t col_ld = cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride;
  if ((rows <= 1 || row_stride == 1) && col_ld >= std::max<int64_t>(rows, 1) && col_ld <= INT_MAX) {
    return Layout{true, static_cast<int>(col_ld)};
  }
  return std::nullopt;
}

// One panel through OpenBLAS. A single output row or column goes to gemv: OpenBLAS
// 0.3.21's gemm packs both operands even when one of them is a vector.
template <typename T>
void blas_tile(DType, const GemmTile& t) {
  const Layout la = *blas_layout(t.m, t.k, t.a_rs, t.a_cs);
  const Layout lb = *blas_layout(t.k, t.n, t.b_rs, t.b_cs);
  const int m = static_cast<int>(t.m), n = static_cast<int>(t.n), k = static_cast<int>(t.k);
  const int ldc = static_cast<int>(t.ldc);
  const T* a = reinterpret_cast<const T*>(t.a);
  const T* b = reinterpret_cast<const T*>(t.b);
  T* c = reinterpret_cast<T*>(t.c);
  if (t.n == 1) {
    // y = A x: x is B's only column, y is C's.
    const int incx = lb.transposed ? 1 : lb.ld;
    if (la.transposed) {
      blas::gemv(true, k, m, a, la.ld, b, incx, T(0), c, ldc);
    } else {
      blas::gemv(false, m, k, a, la.ld, b, incx, T(0), c, ldc);
    }
  } else if (t.m == 1) {
    // y = B^T x: x is A's only row, y is C's.
    const int incx = la.transposed ? la.ld : 1;
    if (lb.transposed) {
      blas::gemv(false, n, k, b, lb.ld, a, incx, T(0), c, 1);
    } else {
      blas::gemv(true, k, n, b, lb.ld, a, incx, T(0), c, 1);
    }
  } else {
    blas::gemm(la.transposed, lb.transposed, m, n, k, a, la.ld, b, lb.ld, T(0), c, ldc);
  }
}

using TileFn = void (*)(DType, const GemmTile&);

TileFn tile_fn(DType dtype) {
  switch (dtype) {
    case DType::Float32: return &blas_tile<float>;
    case DType::Float64: return &blas_tile<double>;
    case DType::Complex64: return &blas_tile<std::complex<float>>;
    case DType::Complex128: return &blas_tile<std::complex<double>>;
    default: return is_integral(dtype) ? &integer_gemm_tile : nullptr;
  }
}

}  // namespace

bool blas_accepts(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  return blas_layout(rows, cols, row_stride, col_stride).has_value();
}

bool gemm_supports(DType dtype) { return tile_fn(dtype) != nullptr; }

void ensure_blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void gemm_batched(ThreadPool& pool, DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                  const GemmOperand& a, const GemmOperand& b, void* c) {
  const TileFn run = tile_fn(dtype);
  KILN_CHECK_KIND(run != nullptr, Type, "gemm", "dtype {} is not supported", dtype_name(dtype));
  if (batch == 0 || M == 0 || N == 0) return;
  const int64_t esz = static_cast<int64_t>(itemsize(dtype));
  if (K == 0) {
    std::memset(c, 0, static_cast<size_t>(batch * M * N * esz));
    return;
  }
  const bool blas = !is_integral(dtype);
  if (blas) {
    KILN_CHECK_KIND(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX, NotImplemented, "gemm",
                    "BLAS takes dimensions up to 2^31 - 1, got M={}, N={}, K={}", M, N, K);
    KILN_CHECK(blas_accepts(M, K, a.row_stride, a.col_stride) && blas_accepts(K, N, b.row_stride, b.col_stride),
               "gemm", "operand strides not accepted by BLAS (the caller must copy such operands first)");
    ensure_blas_single_threaded();
  }

  // Cut each product into panels along its longer output side only when the batch
  // alone cannot occupy the pool.
  const bool split_rows = M >= N;
  const int64_t extent = split_rows ? M : N;
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int64_t threads = pool.num_threads();
  int64_t panels = 1;
  if (batch < threads) {
    const int64_t by_work = std::max<int64_t>(1, static_cast<int64_t>(work / kMinTaskWork));
    const int64_t by_extent = std::max<int64_t>(1, extent / kPanelAlign);
    panels = std::min({ceil_div(threads, batch), by_work, by_extent});
  }
  const int64_t panel_extent =
      panels == 1 ? extent : ceil_div(ceil_div(extent, panels), kPanelAlign) * kPanelAlign;
  panels = ceil_div(extent, panel_extent);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(kMinTaskWork / (work / static_cast<double>(panels))));

  const char* a_base = static_cast<const char*>(a.base);
  const char* b_base = static_cast<const char*>(b.base);
  char* c_base = static_cast<char*>(c);
  pool.parallel_for(batch * panels, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t i = task / panels;
      const int64_t start = (task % panels) * panel_extent;
      const int64_t len = std::min(panel_extent, extent - start);
      GemmTile tile;
      tile.a = a_base + (a.batch_offsets[i] + (split_rows ? start * a.row_stride : 0)) * esz;
      tile.a_rs = a.row_stride;
      tile.a_cs = a.col_stride;
      tile.b = b_base + (b.batch_offsets[i] + (split_rows ? 0 : start * b.col_stride)) * esz;
      tile.b_rs = b.row_stride;
      tile.b_cs = b.col_stride;
      tile.c = c_base + (i * M * N + (split_rows ? start * N : start)) * esz;
      tile.ldc = N;
      tile.m = split_rows ? len : M;
      tile.n = split_rows ? N : len;
      tile.k = K;
      run(dtype, tile);
    }
  });
}

namespace blas {
namespace {

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

}  // namespace

void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float beta,
          float* c, int ldc) {
  const BlasBufferGuard guard;
  cblas_sgemm(CblasRowMajor, op(ta), op(tb), m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool ta, bool tb, int m, int n, int k, const double* a, int lda, const double* b, int ldb, double beta,
          double* c, int ldc) {
  const BlasBufferGuard guard;
  cblas_dgemm(CblasRowMajor, op(ta), op(tb), m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool ta, bool tb, int m, int n, int k, const c64* a, int lda, const c64* b, int ldb, c64 beta, c64* c,
          int ldc) {
  const BlasBufferGuard guard;
  const c64 one(1);
  cblas_cgemm(CblasRowMajor, op(ta), op(tb), m, n, k, &one, a, lda, b, ldb, &beta, c, ldc);
}
void gemm(bool ta, bool tb, int m, int n, int k, const c128* a, int lda, const c128* b, int ldb, c128 beta, c128* c,
          int ldc) {
  const BlasBufferGuard guard;
  const c128 one(1);
  cblas_zgemm(CblasRowMajor, op(ta), op(tb), m, n, k, &one, a, lda, b, ldb, &beta, c, ldc);
}
void gemv(bool t, int rows, int cols, const float* a, int lda, const float* x, int incx, float beta, float* y,
          int incy) {
  const BlasBufferGuard guard;
  cblas_sgemv(CblasRowMajor, op(t), rows, cols, 1.0f, a, lda, x, incx, beta, y, incy);
}
void gemv(bool t, int rows, int cols, const double* a, int lda, const double* x, int incx, double beta, double* y,
          int incy) {
  const BlasBufferGuard guard;
  cblas_dgemv(CblasRowMajor, op(t), rows, cols, 1.0, a, lda, x, incx, beta, y, incy);
}
void gemv(bool t, int rows, int cols, const c64* a, int lda, const c64* x, int incx, c64 beta, c64* y, int incy) {
  const BlasBufferGuard guard;
  const c64 one(1);
  cblas_cgemv(CblasRowMajor, op(t), rows, cols, &one, a, lda, x, incx, &beta, y, incy);
}
void gemv(bool t, int rows, int cols, const c128* a, int lda, const c128* x, int incx, c128 beta, c128* y, int incy) {
  const BlasBufferGuard guard;
  const c128 one(1);
  cblas_zgemv(CblasRowMajor, op(t), rows, cols, &one, a, lda, x, incx, &beta, y, incy);
}

}  // namespace blas

}  // namespace kiln::cpu
