// Least squares (gels, gelsy, gelsd, gelss) and the pseudo-inverse product from a
// factorisation, on the CPU.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/linalg/lapack.h"
#include "backend/cpu/linalg/linalg_common.h"
#include "backend/cpu/linalg/linalg_kernels.h"
#include "backend/cpu/matmul/blas_buffer_guard.h"

namespace kiln::cpu::linalg {
namespace {

using lapack::I;

template <typename T>
void lstsq_typed(const ExecutionContext& ctx, const LstsqProblem& p) {
  using R = Real<T>;
  const int64_t m = p.m, n = p.n, k = std::min(m, n);
  const int64_t ldb = std::max<int64_t>({int64_t{1}, m, n});
  const I lda = static_cast<I>(std::max<int64_t>(1, m));
  const double cost = 6.0 * static_cast<double>(m) * n * std::max<int64_t>(1, k) + 2.0 * ldb * p.nrhs * n;
  for_each_matrix(ctx.pool(), p.batch, cost, [&](int64_t b) {
    T* a = static_cast<T*>(p.a) + b * m * n;
    T* rhs = static_cast<T*>(p.b) + b * ldb * p.nrhs;
    I rank = 0;
    I info = 0;
    std::vector<R> s_local;
    R* s = nullptr;
    if (p.driver == backend::LstsqDriver::Gelsd || p.driver == backend::LstsqDriver::Gelss) {
      if (p.singular_values != nullptr) {
        s = static_cast<R*>(p.singular_values) + b * k;
      } else {
        s_local.resize(static_cast<size_t>(std::max<int64_t>(1, k)));
        s = s_local.data();
      }
    }
    const BlasBufferGuard guard;
    const I mi = static_cast<I>(m), ni = static_cast<I>(n), ri = static_cast<I>(p.nrhs), lb = static_cast<I>(ldb);
    const R rcond = static_cast<R>(p.rcond);
    switch (p.driver) {
      case backend::LstsqDriver::Gels: info = lapack::gels(mi, ni, ri, a, lda, rhs, lb); break;
      case backend::LstsqDriver::Gelsy: {
        std::vector<I> jpvt(static_cast<size_t>(std::max<int64_t>(1, n)), 0);
        info = lapack::gelsy(mi, ni, ri, a, lda, rhs, lb, jpvt.data(), rcond, &rank);
        break;
      }
      case backend::LstsqDriver::Gelsd: info = lapack::gelsd(mi, ni, ri, a, lda, rhs, lb, s, rcond, &rank); break;
      case backend::LstsqDriver::Gelss: info = lapack::gelss(mi, ni, ri, a, lda, rhs, lb, s, rcond, &rank); break;
    }
    KILN_CHECK(info != LAPACK_WORK_MEMORY_ERROR && info != LAPACK_TRANSPOSE_MEMORY_ERROR, "lstsq",
               "out of memory: LAPACK could not allocate its workspace");
    p.info[b] = info;
    if (p.rank != nullptr) p.rank[b] = rank;
  });
}

template <typename T>
void pinv_typed(const ExecutionContext& ctx, const PinvProblem& p) {
  using R = Real<T>;
  const int64_t no = p.n_out, mo = p.m_out, k = p.k;
  const T* l_all = static_cast<const T*>(p.l);
  const T* r_all = static_cast<const T*>(p.r);
  const R* d_all = static_cast<const R*>(p.d);
  T* x_all = static_cast<T*>(p.x);
  for_each_matrix(ctx.pool(), p.batch, 2.0 * no * mo * k + 1, [&](int64_t b) {
    const R* d = d_all + b * k;
    const T* l = l_all + b * no * k;
    const T* r = r_all + b * mo * k;
    T* x = x_all + b * no * mo;
    R largest = 0;
    for (int64_t i = 0; i < k; ++i) largest = std::max(largest, std::abs(d[i]));
    const double cutoff = std::max(p.atol[b], p.rtol[b] * static_cast<double>(largest));
    std::vector<T> inv_d(static_cast<size_t>(std::max<int64_t>(1, k)));
    for (int64_t i = 0; i < k; ++i) {
      // Strictly above the cutoff, as PyTorch's `S > tol` (NaN is dropped).
      const bool keep = std::abs(static_cast<double>(d[i])) > cutoff;
      inv_d[i] = keep ? T(R(1) / d[i]) : T(0);
    }
    for (int64_t j = 0; j < mo; ++j) {
      for (int64_t i = 0; i < no; ++i) {
        T acc = T(0);
        for (int64_t t = 0; t < k; ++t) {
          if (inv_d[t] == T(0)) continue;
          // L(i, t): Vhᴴ(i, t) = conj(Vh(t, i)) when read from Vh (k x n_out, column-major).
          const T li = p.l_from_vh ? conj_of(l[t + i * k]) : l[i + t * no];
          acc += mul(mul(li, inv_d[t]), conj_of(r[j + t * mo]));
        }
        x[i + j * no] = acc;
      }
    }
  });
}

}  // namespace

void lstsq_cpu(const ExecutionContext& ctx, const LstsqProblem& p) {
  lapack::prepare();
  dispatch(p.dtype, "lstsq", [&](auto tag) { lstsq_typed<decltype(tag)>(ctx, p); });
}

void pinv_cpu(const ExecutionContext& ctx, const PinvProblem& p) {
  dispatch(p.dtype, "pinv", [&](auto tag) { pinv_typed<decltype(tag)>(ctx, p); });
}

}  // namespace kiln::cpu::linalg
