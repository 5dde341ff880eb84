// LU family on the CPU: factor (getrf, recursive_lu, or small_lu for tiny matrices),
// solve (getrs), determinant and unpacking from the factors, inverse (getrf + getri).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/linalg/lapack.h"
#include "backend/cpu/linalg/linalg_common.h"
#include "backend/cpu/linalg/linalg_kernels.h"
#include "backend/cpu/linalg/recursive_lu.h"
#include "backend/cpu/linalg/small_lu.h"
#include "backend/cpu/matmul/blas_buffer_guard.h"

namespace kiln::cpu::linalg {
namespace {

double lu_cost(int64_t m, int64_t n) { return 2.0 * static_cast<double>(m) * n * std::min(m, n) / 3.0 + 1.0; }

// LAPACKE reports a failed workspace allocation as LAPACK_WORK_MEMORY_ERROR.
void check_workspace(lapack::I info, const char* op) {
  KILN_CHECK(info != LAPACK_WORK_MEMORY_ERROR && info != LAPACK_TRANSPOSE_MEMORY_ERROR, op,
             "out of memory: LAPACK could not allocate its workspace");
}

// Three routes, by size: small_lu for tiny matrices (a LAPACK call costs more than the
// arithmetic); recursive_lu where it measured faster than getrf; getrf otherwise. A
// matrix holding inf or NaN always goes to getrf, so such input gives exactly what
// LAPACK gives. recursive_lu runs on the calling thread (no pool): its updates split
// over two threads did not measure faster than one thread on the shared 2-vCPU machine
// (docs/bench.md), and a batch is split over the pool matrix by matrix anyway.
template <typename T>
void lu_factor_typed(const ExecutionContext& ctx, const LuFactorProblem& p) {
  T* a = static_cast<T*>(p.a);
  const int64_t k = std::min(p.m, p.n);
  const int64_t matrix = p.m * p.n;
  const bool small = p.m <= kSmallLuOrder && p.n <= kSmallLuOrder;
  const bool recursive = !small && recursive_lu_pays<T>(p.m, p.n);
  if (!small) lapack::prepare();
  for_each_matrix(ctx.pool(), p.batch, lu_cost(p.m, p.n), [&](int64_t b) {
    T* ab = a + b * matrix;
    int32_t* piv = p.pivots + b * k;
    if (small) {
      p.info[b] = small_lu(ab, p.m, p.n, piv);
      return;
    }
    const BlasBufferGuard guard;
    const int64_t lda = std::max<int64_t>(1, p.m);
    if (recursive && all_finite(ab, matrix)) {
      p.info[b] = recursive_lu<T>(nullptr, ab, p.m, p.n, lda, piv);
      return;
    }
    const lapack::I info = lapack::getrf(static_cast<lapack::I>(p.m), static_cast<lapack::I>(p.n), ab,
                                         static_cast<lapack::I>(lda), piv);
    check_workspace(info, "lu_factor");
    p.info[b] = info;
  });
}

template <typename T>
void conjugate(T* x, int64_t count) {
  if constexpr (kIsComplex<T>) {
    for (int64_t i = 0; i < count; ++i) x[i] = std::conj(x[i]);
  }
}

template <typename T>
void lu_solve_typed(const ExecutionContext& ctx, const LuSolveProblem& p) {
  lapack::prepare();
  const T* lu = static_cast<const T*>(p.lu);
  T* b = static_cast<T*>(p.b);
  const lapack::I n = static_cast<lapack::I>(p.n);
  const lapack::I ld = std::max<lapack::I>(1, n);
  for_each_matrix(ctx.pool(), p.batch, 2.0 * p.n * p.n * p.nrhs + 1, [&](int64_t i) {
    T* bi = b + i * p.n * p.nrhs;
    if (p.conjugate_rhs) conjugate(bi, p.n * p.nrhs);
    const BlasBufferGuard guard;
    const lapack::I info = lapack::getrs(p.trans, n, static_cast<lapack::I>(p.nrhs), lu + i * p.n * p.n, ld,
                                         p.pivots + i * p.n, bi, ld);
    check_workspace(info, "lu_solve");
    if (p.conjugate_rhs) conjugate(bi, p.n * p.nrhs);
  });
}

// (-1)^(number of row swaps) from getrf's pivots.
inline bool odd_permutation(const int32_t* piv, int64_t k) {
  bool odd = false;
  for (int64_t i = 0; i < k; ++i) odd ^= piv[i] != i + 1;
  return odd;
}

template <typename T>
void lu_determinant_typed(const ExecutionContext& ctx, const LuDeterminantProblem& p) {
  using R = Real<T>;
  const T* lu = static_cast<const T*>(p.lu);
  for_each_matrix(ctx.pool(), p.batch, static_cast<double>(p.n) * 4 + 1, [&](int64_t b) {
    const T* m = lu + b * p.n * p.n;
    const bool odd = odd_permutation(p.pivots + b * p.n, p.n);
    if (p.det != nullptr) {
      T det = odd ? T(-1) : T(1);
      for (int64_t i = 0; i < p.n; ++i) det = mul(det, m[i + i * p.n]);
      static_cast<T*>(p.det)[b] = det;
    }
    if (p.sign != nullptr) {
      T sign = odd ? T(-1) : T(1);
      R logabs = 0;
      for (int64_t i = 0; i < p.n; ++i) {
        const T d = m[i + i * p.n];
        const R a = std::abs(d);
        logabs += std::log(a);
        // A zero pivot makes the sign 0 (and log|det| -inf), as PyTorch.
        sign = a == R(0) ? T(0) : mul(sign, T(d / a));
      }
      static_cast<T*>(p.sign)[b] = sign;
      static_cast<R*>(p.logabsdet)[b] = logabs;
    }
  });
}

template <typename T>
void lu_unpack_typed(const ExecutionContext& ctx, const LuUnpackProblem& p) {
  const int64_t m = p.m, n = p.n, k = std::min(m, n);
  const T* lu = static_cast<const T*>(p.lu);
  for_each_matrix(ctx.pool(), p.batch, static_cast<double>(m) * n + m * m + 1, [&](int64_t b) {
    const T* f = lu + b * m * n;
    if (p.p != nullptr) {
      // Row i of Pᵀ A is row perm[i] of A, so P[perm[i], i] = 1.
      std::vector<int64_t> perm(static_cast<size_t>(m));
      for (int64_t i = 0; i < m; ++i) perm[i] = i;
      const int32_t* piv = p.pivots + b * k;
      for (int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[piv[i] - 1]);
      T* pm = static_cast<T*>(p.p) + b * m * m;
      std::fill(pm, pm + m * m, T(0));
      for (int64_t i = 0; i < m; ++i) pm[perm[i] + i * m] = T(1);
    }
    if (p.l != nullptr) {
      T* l = static_cast<T*>(p.l) + b * m * k;
      for (int64_t j = 0; j < k; ++j) {
        for (int64_t i = 0; i < m; ++i) l[i + j * m] = i > j ? f[i + j * m] : (i == j ? T(1) : T(0));
      }
    }
    if (p.u != nullptr) {
      T* u = static_cast<T*>(p.u) + b * k * n;
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < k; ++i) u[i + j * k] = i <= j ? f[i + j * m] : T(0);
      }
    }
  });
}

template <typename T>
void inverse_typed(const ExecutionContext& ctx, const InverseProblem& p) {
  lapack::prepare();
  T* a = static_cast<T*>(p.a);
  const lapack::I n = static_cast<lapack::I>(p.n);
  for_each_matrix(ctx.pool(), p.batch, 2.0 * p.n * p.n * p.n + 1, [&](int64_t b) {
    T* ab = a + b * p.n * p.n;
    std::vector<lapack::I> piv(static_cast<size_t>(std::max<int64_t>(1, p.n)));
    const BlasBufferGuard guard;
    lapack::I info = lapack::getrf(n, n, ab, std::max<lapack::I>(1, n), piv.data());
    check_workspace(info, "inv");
    if (info == 0) {
      info = lapack::getri(n, ab, std::max<lapack::I>(1, n), piv.data());
      check_workspace(info, "inv");
    }
    p.info[b] = info;
  });
}

}  // namespace

void lu_factor_cpu(const ExecutionContext& ctx, const LuFactorProblem& p) {
  dispatch(p.dtype, "lu_factor", [&](auto tag) { lu_factor_typed<decltype(tag)>(ctx, p); });
}
void lu_solve_cpu(const ExecutionContext& ctx, const LuSolveProblem& p) {
  if (p.n == 0 || p.nrhs == 0) return;
  dispatch(p.dtype, "lu_solve", [&](auto tag) { lu_solve_typed<decltype(tag)>(ctx, p); });
}
void lu_determinant_cpu(const ExecutionContext& ctx, const LuDeterminantProblem& p) {
  dispatch(p.dtype, "det", [&](auto tag) { lu_determinant_typed<decltype(tag)>(ctx, p); });
}
void lu_unpack_cpu(const ExecutionContext& ctx, const LuUnpackProblem& p) {
  dispatch(p.dtype, "lu", [&](auto tag) { lu_unpack_typed<decltype(tag)>(ctx, p); });
}
void inverse_cpu(const ExecutionContext& ctx, const InverseProblem& p) {
  if (p.n == 0) {
    std::fill(p.info, p.info + p.batch, 0);
    return;
  }
  dispatch(p.dtype, "inv", [&](auto tag) { inverse_typed<decltype(tag)>(ctx, p); });
}

}  // namespace kiln::cpu::linalg
