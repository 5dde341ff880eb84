// Cholesky (potrf), QR (geqrf + orgqr/ungqr), SVD (gesdd) and the symmetric/Hermitian
// eigensolver (syevd/heevd) on the CPU, one LAPACK call per matrix, batches over the
// pool.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/linalg/lapack.h"
#include "backend/cpu/linalg/linalg_common.h"
#include "backend/cpu/linalg/linalg_kernels.h"
#include "backend/cpu/matmul/blas_buffer_guard.h"

namespace kiln::cpu::linalg {
namespace {

using lapack::I;

I ld(int64_t rows) { return static_cast<I>(std::max<int64_t>(1, rows)); }

void check_workspace(I info, const char* op) {
  KILN_CHECK(info != LAPACK_WORK_MEMORY_ERROR && info != LAPACK_TRANSPOSE_MEMORY_ERROR, op,
             "out of memory: LAPACK could not allocate its workspace");
}

double cubic(int64_t m, int64_t n) { return 4.0 * static_cast<double>(m) * n * std::min(m, n) + 1.0; }

template <typename T>
void cholesky_typed(const ExecutionContext& ctx, const CholeskyProblem& p) {
  const int64_t n = p.n;
  for_each_matrix(ctx.pool(), p.batch, cubic(n, n) / 12, [&](int64_t b) {
    T* a = static_cast<T*>(p.a) + b * n * n;
    const BlasBufferGuard guard;
    const I info = lapack::potrf(p.upper ? 'U' : 'L', static_cast<I>(n), a, ld(n));
    check_workspace(info, "cholesky");
    p.info[b] = info;
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < n; ++i) {
        if (p.upper ? i > j : i < j) a[i + j * n] = T(0);
      }
    }
  });
}

template <typename T>
void qr_typed(const ExecutionContext& ctx, const QrProblem& p) {
  const int64_t m = p.m, n = p.n, k = std::min(m, n);
  for_each_matrix(ctx.pool(), p.batch, cubic(m, n), [&](int64_t b) {
    T* a = static_cast<T*>(p.a) + b * m * n;
    std::vector<T> tau(static_cast<size_t>(std::max<int64_t>(1, k)));
    const BlasBufferGuard guard;
    check_workspace(lapack::geqrf(static_cast<I>(m), static_cast<I>(n), a, ld(m), tau.data()), "qr");
    T* r = static_cast<T*>(p.r) + b * p.r_rows * n;
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < p.r_rows; ++i) r[i + j * p.r_rows] = i <= j ? a[i + j * m] : T(0);
    }
    if (p.q == nullptr) return;
    T* q = static_cast<T*>(p.q) + b * m * p.q_cols;
    std::copy_n(a, m * k, q);
    check_workspace(lapack::orgqr(static_cast<I>(m), static_cast<I>(p.q_cols), static_cast<I>(k), q, ld(m), tau.data()),
                    "qr");
  });
}

template <typename T>
void svd_typed(const ExecutionContext& ctx, const SvdProblem& p) {
  using R = Real<T>;
  const int64_t m = p.m, n = p.n, k = std::min(m, n);
  const bool vectors = p.u != nullptr;
  const int64_t u_cols = p.full_matrices ? m : k;
  const int64_t vh_rows = p.full_matrices ? n : k;
  const char jobz = !vectors ? 'N' : (p.full_matrices ? 'A' : 'S');
  for_each_matrix(ctx.pool(), p.batch, cubic(m, n) * 3, [&](int64_t b) {
    T* a = static_cast<T*>(p.a) + b * m * n;
    R* s = static_cast<R*>(p.s) + b * k;
    T* u = vectors ? static_cast<T*>(p.u) + b * m * u_cols : nullptr;
    T* vh = vectors ? static_cast<T*>(p.vh) + b * vh_rows * n : nullptr;
    // Reference LAPACK 3.10+ answers info = -4 for a non-finite input, older versions
    // info > 0 or a hang; checking first makes the outcome the same everywhere.
    if (!all_finite(a, m * n)) {
      p.info[b] = -4;
      return;
    }
    T dummy[1];
    const BlasBufferGuard guard;
    const I info = lapack::gesdd(jobz, static_cast<I>(m), static_cast<I>(n), a, ld(m), s, vectors ? u : dummy,
                                 vectors ? ld(m) : 1, vectors ? vh : dummy, vectors ? ld(vh_rows) : 1);
    check_workspace(info, "svd");
    p.info[b] = info;
  });
}

template <typename T>
void eigh_typed(const ExecutionContext& ctx, const EighProblem& p) {
  using R = Real<T>;
  const int64_t n = p.n;
  for_each_matrix(ctx.pool(), p.batch, cubic(n, n) * 2, [&](int64_t b) {
    T* a = static_cast<T*>(p.a) + b * n * n;
    const BlasBufferGuard guard;
    const I info = lapack::eigh(p.vectors ? 'V' : 'N', p.upper ? 'U' : 'L', static_cast<I>(n), a, ld(n),
                                static_cast<R*>(p.w) + b * n);
    check_workspace(info, "eigh");
    p.info[b] = info;
  });
}

}  // namespace

void cholesky_cpu(const ExecutionContext& ctx, const CholeskyProblem& p) {
  lapack::prepare();
  dispatch(p.dtype, "cholesky", [&](auto tag) { cholesky_typed<decltype(tag)>(ctx, p); });
}
void qr_cpu(const ExecutionContext& ctx, const QrProblem& p) {
  lapack::prepare();
  dispatch(p.dtype, "qr", [&](auto tag) { qr_typed<decltype(tag)>(ctx, p); });
}
void svd_cpu(const ExecutionContext& ctx, const SvdProblem& p) {
  lapack::prepare();
  dispatch(p.dtype, "svd", [&](auto tag) { svd_typed<decltype(tag)>(ctx, p); });
}
void eigh_cpu(const ExecutionContext& ctx, const EighProblem& p) {
  lapack::prepare();
  dispatch(p.dtype, "eigh", [&](auto tag) { eigh_typed<decltype(tag)>(ctx, p); });
}

}  // namespace kiln::cpu::linalg
