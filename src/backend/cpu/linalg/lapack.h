// LAPACK through LAPACKE, column-major, overloaded on the element type so the kernels
// are written once for float32, float64, complex64 and complex128. Include only from
// the linalg kernels' .cpp files (lapacke.h's complex type must be std::complex here).
#pragma once

#include <complex>

// lapack.h (which lapacke.h includes first) takes the complex types as defined here.
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>
#include <mutex>

#include "backend/cpu/matmul/blas.h"

namespace kiln::cpu::lapack {

using c64 = std::complex<float>;
using c128 = std::complex<double>;
using I = lapack_int;
constexpr int kCol = LAPACK_COL_MAJOR;

// LAPACKE's high-level calls scan every input for NaN first and refuse it (info < 0);
// PyTorch calls LAPACK itself, so NaN flows through getrf, getrs, ... and shows up in
// the results. Also sets OpenBLAS to one thread: kiln's pool splits the batches.
inline void prepare() {
  static std::once_flag once;
  std::call_once(once, [] {
    LAPACKE_set_nancheck(0);
    ensure_blas_single_threaded();
  });
}

// One overload per element type; P is LAPACK's letter for it.
#define KILN_LAPACK_FOR_EACH_TYPE(X) X(float, float, s) X(double, double, d) X(c64, float, c) X(c128, double, z)

#define KILN_LAPACK_COMMON(T, R, P)                                                                                \
  inline I getrf(I m, I n, T* a, I lda, I* ipiv) { return LAPACKE_##P##getrf(kCol, m, n, a, lda, ipiv); }        \
  inline I getrs(char trans, I n, I nrhs, const T* a, I lda, const I* ipiv, T* b, I ldb) {                       \
    return LAPACKE_##P##getrs(kCol, trans, n, nrhs, a, lda, ipiv, b, ldb);                                       \
  }                                                                                                              \
  inline I getri(I n, T* a, I lda, const I* ipiv) { return LAPACKE_##P##getri(kCol, n, a, lda, ipiv); }          \
  inline I potrf(char uplo, I n, T* a, I lda) { return LAPACKE_##P##potrf(kCol, uplo, n, a, lda); }              \
  inline I geqrf(I m, I n, T* a, I lda, T* tau) { return LAPACKE_##P##geqrf(kCol, m, n, a, lda, tau); }          \
  inline I gesdd(char jobz, I m, I n, T* a, I lda, R* s, T* u, I ldu, T* vt, I ldvt) {                           \
    return LAPACKE_##P##gesdd(kCol, jobz, m, n, a, lda, s, u, ldu, vt, ldvt);                                    \
  }                                                                                                              \
  inline I gels(I m, I n, I nrhs, T* a, I lda, T* b, I ldb) {                                                    \
    return LAPACKE_##P##gels(kCol, 'N', m, n, nrhs, a, lda, b, ldb);                                             \
  }                                                                                                              \
  inline I gelsy(I m, I n, I nrhs, T* a, I lda, T* b, I ldb, I* jpvt, R rcond, I* rank) {                        \
    return LAPACKE_##P##gelsy(kCol, m, n, nrhs, a, lda, b, ldb, jpvt, rcond, rank);                              \
  }                                                                                                              \
  inline I gelsd(I m, I n, I nrhs, T* a, I lda, T* b, I ldb, R* s, R rcond, I* rank) {                           \
    return LAPACKE_##P##gelsd(kCol, m, n, nrhs, a, lda, b, ldb, s, rcond, rank);                                 \
  }                                                                                                              \
  inline I gelss(I m, I n, I nrhs, T* a, I lda, T* b, I ldb, R* s, R rcond, I* rank) {                           \
    return LAPACKE_##P##gelss(kCol, m, n, nrhs, a, lda, b, ldb, s, rcond, rank);                                 \
  }
KILN_LAPACK_FOR_EACH_TYPE(KILN_LAPACK_COMMON)
#undef KILN_LAPACK_COMMON
#undef KILN_LAPACK_FOR_EACH_TYPE

// Q from geqrf's reflectors: orgqr for real, ungqr for complex; the symmetric/Hermitian
// eigensolver: syevd for real, heevd for complex.
inline I orgqr(I m, I n, I k, float* a, I lda, const float* tau) { return LAPACKE_sorgqr(kCol, m, n, k, a, lda, tau); }
inline I orgqr(I m, I n, I k, double* a, I lda, const double* tau) {
  return LAPACKE_dorgqr(kCol, m, n, k, a, lda, tau);
}
inline I orgqr(I m, I n, I k, c64* a, I lda, const c64* tau) { return LAPACKE_cungqr(kCol, m, n, k, a, lda, tau); }
inline I orgqr(I m, I n, I k, c128* a, I lda, const c128* tau) { return LAPACKE_zungqr(kCol, m, n, k, a, lda, tau); }
inline I eigh(char jobz, char uplo, I n, float* a, I lda, float* w) {
  return LAPACKE_ssyevd(kCol, jobz, uplo, n, a, lda, w);
}
inline I eigh(char jobz, char uplo, I n, double* a, I lda, double* w) {
  return LAPACKE_dsyevd(kCol, jobz, uplo, n, a, lda, w);
}
inline I eigh(char jobz, char uplo, I n, c64* a, I lda, float* w) {
  return LAPACKE_cheevd(kCol, jobz, uplo, n, a, lda, w);
}
inline I eigh(char jobz, char uplo, I n, c128* a, I lda, double* w) {
  return LAPACKE_zheevd(kCol, jobz, uplo, n, a, lda, w);
}

}  // namespace kiln::cpu::lapack
