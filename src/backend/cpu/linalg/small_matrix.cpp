// Closed-form determinant, inverse and solve for batches of n <= 4 matrices.
//
// Matrices are gathered kLanes at a time into structure-of-arrays scratch (entry (i, j)
// of every lane contiguous), so each cofactor formula is one loop over lanes that the
// compiler vectorises; one LAPACK call per 4x4 matrix costs more than the arithmetic.
// A matrix whose determinant is 0 or not finite (singular, or a scale that over- or
// underflows the cofactors) is redone by LU with partial pivoting, so info and the
// values are what getrf/getrs give.
#include <algorithm>
#include <cmath>

#include "backend/cpu/linalg/isa_clones.h"
#include "backend/cpu/linalg/linalg_common.h"
#include "backend/cpu/linalg/linalg_kernels.h"
#include "backend/cpu/linalg/small_lu.h"
#include "kiln/int_math.h"

namespace kiln::cpu::linalg {
namespace {

constexpr int kLanes = 16;

template <typename T>
bool finite(T v) {
  if constexpr (kIsComplex<T>) return std::isfinite(v.real()) && std::isfinite(v.imag());
  else return std::isfinite(v);
}

// SoA: a[(i + j * N) * kLanes + l] is entry (i, j) of lane l; the same for inv.
template <typename T, int N>
[[gnu::always_inline]] inline void closed_form(const T* a, T* det, T* inv) {
  auto A = [&](int i, int j, int l) { return a[(i + j * N) * kLanes + l]; };
  auto B = [&](int i, int j, int l) -> T& { return inv[(i + j * N) * kLanes + l]; };
  for (int l = 0; l < kLanes; ++l) {
    if constexpr (N == 1) {
      det[l] = A(0, 0, l);
      B(0, 0, l) = T(1) / det[l];
    } else if constexpr (N == 2) {
      const T d = mul(A(0, 0, l), A(1, 1, l)) - mul(A(0, 1, l), A(1, 0, l));
      const T r = T(1) / d;
      det[l] = d;
      B(0, 0, l) = mul(A(1, 1, l), r);
      B(0, 1, l) = -mul(A(0, 1, l), r);
      B(1, 0, l) = -mul(A(1, 0, l), r);
      B(1, 1, l) = mul(A(0, 0, l), r);
    } else if constexpr (N == 3) {
      auto m2 = [&](int i0, int j0, int i1, int j1) {
        return mul(A(i0, j0, l), A(i1, j1, l)) - mul(A(i0, j1, l), A(i1, j0, l));
      };
      const T c00 = m2(1, 1, 2, 2), c01 = -m2(1, 0, 2, 2), c02 = m2(1, 0, 2, 1);
      const T d = mul(A(0, 0, l), c00) + mul(A(0, 1, l), c01) + mul(A(0, 2, l), c02);
      const T r = T(1) / d;
      det[l] = d;
      B(0, 0, l) = mul(c00, r);
      B(1, 0, l) = mul(c01, r);
      B(2, 0, l) = mul(c02, r);
      B(0, 1, l) = mul(-m2(0, 1, 2, 2), r);
      B(1, 1, l) = mul(m2(0, 0, 2, 2), r);
      B(2, 1, l) = mul(-m2(0, 0, 2, 1), r);
      B(0, 2, l) = mul(m2(0, 1, 1, 2), r);
      B(1, 2, l) = mul(-m2(0, 0, 1, 2), r);
      B(2, 2, l) = mul(m2(0, 0, 1, 1), r);
    } else {
      // 2x2 minors of the top two rows (s) and the bottom two rows (c): Laplace
      // expansion along rows 0-1.
      auto m2 = [&](int r0, int c0, int c1) {
        return mul(A(r0, c0, l), A(r0 + 1, c1, l)) - mul(A(r0, c1, l), A(r0 + 1, c0, l));
      };
      const T s0 = m2(0, 0, 1), s1 = m2(0, 0, 2), s2 = m2(0, 0, 3), s3 = m2(0, 1, 2), s4 = m2(0, 1, 3),
              s5 = m2(0, 2, 3);
      const T c0 = m2(2, 0, 1), c1 = m2(2, 0, 2), c2 = m2(2, 0, 3), c3 = m2(2, 1, 2), c4 = m2(2, 1, 3),
              c5 = m2(2, 2, 3);
      const T d = mul(s0, c5) - mul(s1, c4) + mul(s2, c3) + mul(s3, c2) - mul(s4, c1) + mul(s5, c0);
      const T r = T(1) / d;
      det[l] = d;
      auto e = [&](int i, int j) { return A(i, j, l); };
      auto dot3 = [&](T x0, T y0, T x1, T y1, T x2, T y2) { return mul(mul(x0, y0) - mul(x1, y1) + mul(x2, y2), r); };
      B(0, 0, l) = dot3(e(1, 1), c5, e(1, 2), c4, e(1, 3), c3);
      B(0, 1, l) = -dot3(e(0, 1), c5, e(0, 2), c4, e(0, 3), c3);
      B(0, 2, l) = dot3(e(3, 1), s5, e(3, 2), s4, e(3, 3), s3);
      B(0, 3, l) = -dot3(e(2, 1), s5, e(2, 2), s4, e(2, 3), s3);
      B(1, 0, l) = -dot3(e(1, 0), c5, e(1, 2), c2, e(1, 3), c1);
      B(1, 1, l) = dot3(e(0, 0), c5, e(0, 2), c2, e(0, 3), c1);
      B(1, 2, l) = -dot3(e(3, 0), s5, e(3, 2), s2, e(3, 3), s1);
      B(1, 3, l) = dot3(e(2, 0), s5, e(2, 2), s2, e(2, 3), s1);
      B(2, 0, l) = dot3(e(1, 0), c4, e(1, 1), c2, e(1, 3), c0);
      B(2, 1, l) = -dot3(e(0, 0), c4, e(0, 1), c2, e(0, 3), c0);
      B(2, 2, l) = dot3(e(3, 0), s4, e(3, 1), s2, e(3, 3), s0);
      B(2, 3, l) = -dot3(e(2, 0), s4, e(2, 1), s2, e(2, 3), s0);
      B(3, 0, l) = -dot3(e(1, 0), c3, e(1, 1), c1, e(1, 2), c0);
      B(3, 1, l) = dot3(e(0, 0), c3, e(0, 1), c1, e(0, 2), c0);
      B(3, 2, l) = -dot3(e(3, 0), s3, e(3, 1), s1, e(3, 2), s0);
      B(3, 3, l) = dot3(e(2, 0), s3, e(2, 1), s1, e(2, 2), s0);
    }
  }
}

// The LU route for one matrix (column-major a, n x n): det, inverse and solve as LAPACK
// would give them.
template <typename T>
int32_t by_lu(const SmallMatrixProblem& p, int64_t b, T* det, T* inv, T* x) {
  const int64_t n = p.n;
  T lu[16];
  int32_t piv[4];
  std::copy_n(static_cast<const T*>(p.a) + b * n * n, n * n, lu);
  const int32_t info = small_lu(lu, n, n, piv);
  if (det != nullptr) {
    T d = T(1);
    for (int64_t i = 0; i < n; ++i) d = mul(d, lu[i + i * n]) * T(piv[i] != i + 1 ? -1 : 1);
    *det = d;
  }
  if (inv != nullptr) {
    std::fill_n(inv, n * n, T(0));
    for (int64_t i = 0; i < n; ++i) inv[i + i * n] = T(1);
    small_lu_solve(lu, piv, n, inv, n);
  }
  if (x != nullptr) small_lu_solve(lu, piv, n, x, p.nrhs);
  return info;
}

// Matrices [kLanes * begin, kLanes * end) of the batch.
template <typename T, int N>
[[gnu::always_inline]] inline void process_groups(const SmallMatrixProblem& p, int64_t begin, int64_t end) {
  constexpr int NN = N * N;
  const T* a = static_cast<const T*>(p.a);
  T* det_out = static_cast<T*>(p.det);
  T* inv_out = static_cast<T*>(p.inverse);
  T* b_out = static_cast<T*>(p.b);
  alignas(64) T soa[NN * kLanes];
  alignas(64) T inv[NN * kLanes];
  alignas(64) T det[kLanes];
  for (int64_t g = begin; g < end; ++g) {
    const int64_t b0 = g * kLanes;
    const int lanes = static_cast<int>(std::min<int64_t>(kLanes, p.batch - b0));
    for (int l = 0; l < kLanes; ++l) {
      // Idle lanes compute on the identity: no division by zero to trap on.
      const T* src = a + (b0 + std::min(l, lanes - 1)) * NN;
      for (int e = 0; e < NN; ++e) soa[e * kLanes + l] = l < lanes ? src[e] : T((e % (N + 1)) == 0 ? 1 : 0);
    }
    closed_form<T, N>(soa, det, inv);
    for (int l = 0; l < lanes; ++l) {
      const int64_t b = b0 + l;
      T* x = b_out != nullptr ? b_out + b * N * p.nrhs : nullptr;
      if (det[l] == T(0) || !finite(det[l])) {
        T* inv_b = inv_out != nullptr ? inv_out + b * NN : nullptr;
        T* det_b = det_out != nullptr ? det_out + b : nullptr;
        const int32_t info = by_lu<T>(p, b, det_b, inv_b, x);
        if (p.info != nullptr) p.info[b] = info;
        continue;
      }
      if (p.info != nullptr) p.info[b] = 0;
      if (det_out != nullptr) det_out[b] = det[l];
      if (inv_out != nullptr) {
        for (int e = 0; e < NN; ++e) inv_out[b * NN + e] = inv[e * kLanes + l];
      }
      if (x != nullptr) {
        for (int64_t c = 0; c < p.nrhs; ++c) {
          T col[N];
          for (int i = 0; i < N; ++i) col[i] = x[i + c * N];
          for (int i = 0; i < N; ++i) {
            T s = T(0);
            for (int j = 0; j < N; ++j) s += mul(inv[(i + j * N) * kLanes + l], col[j]);
            x[i + c * N] = s;
          }
        }
      }
    }
  }
}

// The lane loops compiled for AVX2 and AVX-512 too, picked once at run time.
template <typename T, int N>
void small_matrix_typed(const ExecutionContext& ctx, const SmallMatrixProblem& p) {
  const auto run = IsaClones<&process_groups<T, N>>::best();
  const int64_t groups = ceil_div(p.batch, int64_t{kLanes});
  ctx.pool().parallel_for(groups, 64, [&](int64_t begin, int64_t end) { run(p, begin, end); });
}

}  // namespace

void small_matrix_cpu(const ExecutionContext& ctx, const SmallMatrixProblem& p) {
  if (p.batch == 0) return;
  KILN_CHECK(p.n >= 1 && p.n <= 4, "linalg", "the closed-form kernel takes n = 1..4, got {}", p.n);
  dispatch(p.dtype, "linalg", [&](auto tag) {
    using T = decltype(tag);
    switch (p.n) {
      case 1: small_matrix_typed<T, 1>(ctx, p); break;
      case 2: small_matrix_typed<T, 2>(ctx, p); break;
      case 3: small_matrix_typed<T, 3>(ctx, p); break;
      default: small_matrix_typed<T, 4>(ctx, p); break;
    }
  });
}

}  // namespace kiln::cpu::linalg
