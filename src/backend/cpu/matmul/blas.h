// Batched GEMM on the CPU (internal): OpenBLAS for float32/float64/complex, an exact
// blocked loop for integers. Callers describe each operand by a base pointer, per-batch
// offsets and 2-D strides; this layer picks NoTrans/Trans and the leading dimension, so
// transposed operands are never copied. Also the CPU backend's only calls into BLAS
// (namespace blas below): every kernel that multiplies through OpenBLAS goes through them.
//
// Threading: kiln's pool does all the parallel work and OpenBLAS runs single-threaded
// (ensure_blas_single_threaded). Each GEMM is cut into row (or column) panels and the
// (batch, panel) pairs are spread over the pool. Two pools that each spin while idle
// fight over the same cores (2 on our build machines), and OpenBLAS's own threading
// cannot help a batch of small matrices; one pool handles both cases and nested calls.
#pragma once

#include <complex>
#include <cstdint>

#include "backend/matmul.h"
#include "kiln/dtype.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

using backend::GemmOperand;

// Whether OpenBLAS can read a rows x cols matrix with these strides in place: row- or
// column-major with a unit inner stride and a leading dimension that covers the other
// extent and fits in a 32-bit int. The stride of a dim of extent 1 never matters.
bool blas_accepts(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// Whether gemm_batched computes this dtype: float32, float64, complex64, complex128 and
// every integer dtype.
bool gemm_supports(DType dtype);

// C[i] = A[i] @ B[i] for i < batch, where A[i] is M x K, B[i] is K x N and C is a
// contiguous [batch, M, N] array of `dtype`. For the BLAS dtypes both operands must
// satisfy blas_accepts; integers take any strides. M, N and K must fit in an int.
void gemm_batched(ThreadPool& pool, DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                  const GemmOperand& a, const GemmOperand& b, void* c);

// Sets OpenBLAS to one thread, once per process (see the threading note above). Code
// that calls OpenBLAS or LAPACK directly from kiln's workers should call this first.
void ensure_blas_single_threaded();

// The BLAS calls, row-major with alpha = 1; op(X) is X^T when its flag is set:
//   gemm: C (m x n, ldc) = op(A) (m x k, lda) @ op(B) (k x n, ldb) + beta C
//   gemv: y = op(A) x + beta y, A stored rows x cols (lda)
namespace blas {
using c64 = std::complex<float>;
using c128 = std::complex<double>;
void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float beta,
          float* c, int ldc);
void gemm(bool ta, bool tb, int m, int n, int k, const double* a, int lda, const double* b, int ldb, double beta,
          double* c, int ldc);
void gemm(bool ta, bool tb, int m, int n, int k, const c64* a, int lda, const c64* b, int ldb, c64 beta, c64* c,
          int ldc);
void gemm(bool ta, bool tb, int m, int n, int k, const c128* a, int lda, const c128* b, int ldb, c128 beta, c128* c,
          int ldc);
void gemv(bool t, int rows, int cols, const float* a, int lda, const float* x, int incx, float beta, float* y,
          int incy);
void gemv(bool t, int rows, int cols, const double* a, int lda, const double* x, int incx, double beta, double* y,
          int incy);
void gemv(bool t, int rows, int cols, const c64* a, int lda, const c64* x, int incx, c64 beta, c64* y, int incy);
void gemv(bool t, int rows, int cols, const c128* a, int lda, const c128* x, int incx, c128 beta, c128* y, int incy);
}  // namespace blas

}  // namespace kiln::cpu
