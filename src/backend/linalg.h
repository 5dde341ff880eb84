// The linalg family of the kernel table: triangular solves, LU, Cholesky, QR, SVD,
// eigh, least squares and the closed-form kernels for tiny matrices (front ends:
// src/ops/linalg_*.cpp).
//
// Layout. Except for the triangular solve, every matrix is column-major, LAPACK's own
// layout: element (i, j) of matrix b of a batch sits at data + b * rows * cols + i + j *
// rows (leading dimension = rows), batches packed one after another. The front end
// materialises broadcast batches and column-major copies, so kernels never see strides
// and LAPACK never copies. Sizes are int64 here; the front end has checked that every
// extent fits LAPACK's 32-bit int.
//
// Errors. Kernels never raise for numerical trouble: they report LAPACK's `info` per
// matrix (0 = success, > 0 = the 1-based index LAPACK names, as PyTorch's `_ex` ops
// return it) and the front end decides whether to raise.
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// Solves op(A) X = B (left) or X op(A) = B (right) in place of B, A triangular
// (`upper` names the triangle read; with `unitriangular` the diagonal is taken as ones
// and not read). Any strides, in elements; a batch stride of 0 broadcasts that operand.
// X is n x nrhs for a left solve and nrhs x n for a right solve. A zero on the diagonal
// gives inf/NaN, never an error (as PyTorch). dtype: float32, float64, complex64,
// complex128. This is the entry point shared with the hybrid models' chunked prefill
// (unit-lower 16/32/64 blocks with many right-hand sides take a register-blocked path).
struct TriangularSolveProblem {
  DType dtype;
  int64_t batch;
  int64_t n;
  int64_t nrhs;
  const void* a;
  int64_t a_batch_stride, a_row_stride, a_col_stride;
  void* x;
  int64_t x_batch_stride, x_row_stride, x_col_stride;
  bool upper;
  bool left;
  bool unitriangular;
};

// getrf: A (m x n) is overwritten by L\U; pivots (batch x min(m, n), 1-based int32) and
// info (batch) are written.
struct LuFactorProblem {
  DType dtype;
  int64_t batch, m, n;
  void* a;
  int32_t* pivots;
  int32_t* info;
};

// getrs: B (n x nrhs) is overwritten by the solution of op(A) X = B where LU/pivots come
// from LuFactorProblem; trans is 'N', 'T' or 'C'. With conjugate_rhs, B is conjugated
// before and X after, which turns A Y = conj(B) into conj(A) X = B (the front end's
// right-sided adjoint solve X Aᴴ = B, transposed).
struct LuSolveProblem {
  DType dtype;
  int64_t batch, n, nrhs;
  const void* lu;
  const int32_t* pivots;
  void* b;
  char trans;
  bool conjugate_rhs;
};

// From LU/pivots: det (dtype) when `det` is set; sign (dtype) and log|det| (the real
// dtype) when `sign` is set.
struct LuDeterminantProblem {
  DType dtype;
  int64_t batch, n;
  const void* lu;
  const int32_t* pivots;
  void* det;
  void* sign;
  void* logabsdet;
};

// Unpacks LU/pivots of an m x n matrix into P (m x m, dtype), L (m x k, unit lower) and
// U (k x n), k = min(m, n); any of the three may be null.
struct LuUnpackProblem {
  DType dtype;
  int64_t batch, m, n;
  const void* lu;
  const int32_t* pivots;
  void* p;
  void* l;
  void* u;
};

// getrf + getri: A (n x n) is overwritten by its inverse where info is 0.
struct InverseProblem {
  DType dtype;
  int64_t batch, n;
  void* a;
  int32_t* info;
};

// Closed forms for n <= 4, batched and vectorised across matrices (no LAPACK call per
// matrix): det (when set), inverse (when set, n x n) and the solution of A X = B (when
// b is set, n x nrhs, in place). A matrix whose determinant is 0 or not finite is
// handed to LU with partial pivoting, so info and the values agree with LAPACK.
struct SmallMatrixProblem {
  DType dtype;
  int64_t batch, n, nrhs;
  const void* a;
  void* det;
  void* inverse;
  void* b;
  int32_t* info;
};

// potrf: A (n x n) is overwritten by L (upper: U), the other triangle zeroed.
struct CholeskyProblem {
  DType dtype;
  int64_t batch, n;
  void* a;
  bool upper;
  int32_t* info;
};

// geqrf + orgqr/ungqr: A (m x n) is destroyed; R (r_rows x n, r_rows = k or m, zero
// below the diagonal) and, when q is set, Q (m x q_cols, q_cols = k or m).
struct QrProblem {
  DType dtype;
  int64_t batch, m, n;
  void* a;
  void* q;
  int64_t q_cols;
  void* r;
  int64_t r_rows;
};

// gesdd: A (m x n) is destroyed; S (batch x k, the real dtype, descending); with u and
// vh set, U (m x u_cols) and Vh (vh_rows x n) where u_cols = vh_rows = k (reduced) or
// m and n (full_matrices).
struct SvdProblem {
  DType dtype;
  int64_t batch, m, n;
  void* a;
  void* s;
  void* u;
  void* vh;
  bool full_matrices;
  int32_t* info;
};

// syevd/heevd: eigenvalues (real, ascending) into w; with `vectors`, A (n x n) is
// overwritten by the eigenvectors (columns). Only the triangle named by `upper` is read.
struct EighProblem {
  DType dtype;
  int64_t batch, n;
  void* a;
  void* w;
  bool upper;
  bool vectors;
  int32_t* info;
};

enum class LstsqDriver { Gels, Gelsy, Gelsd, Gelss };

// A (m x n) destroyed; B (ldb = max(m, n) rows x nrhs) holds the right-hand side in its
// first m rows and gets the solution in its first n (gels: rows n..m-1 hold the
// residual components when m > n). rank (int64, batch) for gelsy/gelsd/gelss and
// singular values (real, batch x min(m, n)) for gelsd/gelss when set.
struct LstsqProblem {
  DType dtype;
  int64_t batch, m, n, nrhs;
  void* a;
  void* b;
  LstsqDriver driver;
  double rcond;
  int64_t* rank;
  void* singular_values;
  int32_t* info;
};

// The pseudo-inverse from a factorisation A = L diag(d) Rᴴ with L (n_out x k) and R
// (m_out x k): X = L diag(1/d) Rᴴ (n_out x m_out), dropping every d with |d| <=
// max(atol, rtol * max|d|) (per-batch atol/rtol, float64). With l_from_vh, L is given as
// Vh (k x n_out) and read as Vhᴴ (the SVD case); d is real (batch x k).
struct PinvProblem {
  DType dtype;
  int64_t batch, n_out, m_out, k;
  const void* l;
  bool l_from_vh;
  const void* d;
  const void* r;
  const double* atol;
  const double* rtol;
  void* x;
};

struct LinalgKernels {
  void (*triangular_solve)(const ExecutionContext& ctx, const TriangularSolveProblem& p) = nullptr;
  void (*lu_factor)(const ExecutionContext& ctx, const LuFactorProblem& p) = nullptr;
  void (*lu_solve)(const ExecutionContext& ctx, const LuSolveProblem& p) = nullptr;
  void (*lu_determinant)(const ExecutionContext& ctx, const LuDeterminantProblem& p) = nullptr;
  void (*lu_unpack)(const ExecutionContext& ctx, const LuUnpackProblem& p) = nullptr;
  void (*inverse)(const ExecutionContext& ctx, const InverseProblem& p) = nullptr;
  void (*small_matrix)(const ExecutionContext& ctx, const SmallMatrixProblem& p) = nullptr;
  void (*cholesky)(const ExecutionContext& ctx, const CholeskyProblem& p) = nullptr;
  void (*qr)(const ExecutionContext& ctx, const QrProblem& p) = nullptr;
  void (*svd)(const ExecutionContext& ctx, const SvdProblem& p) = nullptr;
  void (*eigh)(const ExecutionContext& ctx, const EighProblem& p) = nullptr;
  void (*lstsq)(const ExecutionContext& ctx, const LstsqProblem& p) = nullptr;
  void (*pinv)(const ExecutionContext& ctx, const PinvProblem& p) = nullptr;
};

inline KernelTable<LinalgKernels> linalg_kernels{"linalg"};

}  // namespace kiln::backend
