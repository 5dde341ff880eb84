// LU with partial pivoting for small column-major matrices, without a LAPACK call:
// LAPACK's unblocked getf2 step by step (pivot = first largest |x|, |re|+|im| for
// complex as icamax; a zero pivot is recorded in info and the factorisation goes on),
// so pivots and info agree with getrf. Used by lu_factor for batches of small matrices
// and by the closed-form kernel when a determinant is 0 or not finite.
#pragma once

#include <cstdint>
#include <utility>

#include "backend/cpu/linalg/linalg_common.h"

namespace kiln::cpu::linalg {

// a: m x n column-major (lda = m), overwritten by L\U; pivots: min(m, n) 1-based.
template <typename T>
int32_t small_lu(T* a, int64_t m, int64_t n, int32_t* pivots) {
  int32_t info = 0;
  const int64_t k = m < n ? m : n;
  for (int64_t j = 0; j < k; ++j) {
    int64_t p = j;
    Real<T> best = abs1(a[j + j * m]);
    for (int64_t i = j + 1; i < m; ++i) {
      const Real<T> v = abs1(a[i + j * m]);
      if (v > best) {
        best = v;
        p = i;
      }
    }
    pivots[j] = static_cast<int32_t>(p + 1);
    const T pivot = a[p + j * m];
    if (pivot != T(0)) {
      if (p != j) {
        for (int64_t c = 0; c < n; ++c) std::swap(a[j + c * m], a[p + c * m]);
      }
      const T r = T(1) / pivot;
      for (int64_t i = j + 1; i < m; ++i) a[i + j * m] = mul(a[i + j * m], r);
    } else if (info == 0) {
      info = static_cast<int32_t>(j + 1);
    }
    for (int64_t c = j + 1; c < n; ++c) {
      const T u = a[j + c * m];
      for (int64_t i = j + 1; i < m; ++i) a[i + c * m] -= mul(a[i + j * m], u);
    }
  }
  return info;
}

// Solves A X = B (A n x n factored by small_lu, B n x nrhs column-major, ldb = n).
template <typename T>
void small_lu_solve(const T* lu, const int32_t* pivots, int64_t n, T* b, int64_t nrhs) {
  for (int64_t c = 0; c < nrhs; ++c) {
    T* x = b + c * n;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = pivots[i] - 1;
      if (p != i) std::swap(x[i], x[p]);
    }
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = j + 1; i < n; ++i) x[i] -= mul(lu[i + j * n], x[j]);
    }
    for (int64_t j = n - 1; j >= 0; --j) {
      x[j] = x[j] / lu[j + j * n];
      for (int64_t i = 0; i < j; ++i) x[i] -= mul(lu[i + j * n], x[j]);
    }
  }
}

}  // namespace kiln::cpu::linalg
