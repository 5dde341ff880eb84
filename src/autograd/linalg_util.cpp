// Matrix helpers of the linear-algebra backward formulas (autograd/linalg_util.h).
#include "autograd/linalg_util.h"

#include <algorithm>
#include <complex>
#include <numeric>
#include <vector>

#include "autograd/formula_util.h"
#include "kiln/autograd.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"

namespace kiln::autograd::la {

namespace {

Tensor identity(int64_t n, DType dtype) { return eye(n, n, to_real(dtype)); }

const Scalar kMinusHalfI(std::complex<double>(0.0, -0.5));

}  // namespace

Tensor mT(const Tensor& x) { return x.transpose(-2, -1); }
Tensor mH(const Tensor& x) { return conj(x).transpose(-2, -1); }

Tensor diagonal(const Tensor& x) { return sum(mul(x, identity(x.size(-1), x.dtype())), {-1}); }
Tensor diag_embed(const Tensor& v) { return mul(v.unsqueeze(-1), identity(v.size(-1), v.dtype())); }
Tensor off_diagonal(const Tensor& x) {
  return mul(x, sub(ones({x.size(-1), x.size(-1)}, to_real(x.dtype())), identity(x.size(-1), x.dtype())));
}

Tensor real_of(const Tensor& z) {
  if (!is_complex(z.dtype())) return z;
  return mul(add(z, conj(z)), Scalar(0.5));
}
Tensor imag_of(const Tensor& z) {
  if (!is_complex(z.dtype())) return zeros_of(z);
  return mul(sub(z, conj(z)), kMinusHalfI);  // (z - conj z) / 2i
}
Tensor imag_values(const Tensor& z) {
  NoGradGuard no_grad;
  if (!is_complex(z.dtype())) return zeros_of(z);
  return real_part(mul(z, Scalar(std::complex<double>(0.0, -1.0))));
}

bool all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  NoGradGuard no_grad;
  if (a.numel() == 0) return true;
  const Tensor bad = gt(abs(sub(a, b)), add(mul(abs(b), Scalar(rtol)), Scalar(atol)));
  return sum(bad.to(DType::Int64)).item().to_int64() == 0;
}

LuFactors lu_unpack(const Tensor& LU, const Tensor& pivots) {
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  LuFactors f;
  f.L = add(tril(LU.narrow(-1, 0, k), -1), eye(m, k, to_real(LU.dtype())));
  f.U = triu(LU.narrow(-2, 0, k));
  // P from LAPACK's row swaps: row i of L U is row perm[i] of A, so P[perm[i], i] = 1.
  const Tensor piv = pivots.to(DType::Int64).contiguous();
  Shape batch(LU.sizes().begin(), LU.sizes().end() - 2);
  Shape p_shape = batch;
  p_shape.push_back(m);
  p_shape.push_back(m);
  Tensor P = zeros(p_shape, DType::Float64);
  const int64_t count = k == 0 ? 0 : piv.numel() / k;
  double* p = P.data<double>();
  const int64_t* swaps = piv.data<int64_t>();
  std::vector<int64_t> perm(static_cast<size_t>(m));
  for (int64_t b = 0; b < count; ++b) {
    std::iota(perm.begin(), perm.end(), int64_t{0});
    for (int64_t i = 0; i < k; ++i) {
      const int64_t r = swaps[b * k + i] - 1;
      KILN_CHECK(r >= 0 && r < m, "lu backward", "pivot {} out of range for {} rows", r + 1, m);
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(r)]);
    }
    for (int64_t i = 0; i < m; ++i) p[b * m * m + perm[static_cast<size_t>(i)] * m + i] = 1.0;
  }
  if (count == 0 && m > 0) P = eye(m, m, DType::Float64).expand(p_shape).contiguous();
  f.P = P.to(LU.dtype());
  return f;
}

Tensor lu_backward(const Tensor& gL, const Tensor& gU, const Tensor& P, const Tensor& L, const Tensor& U) {
  const int64_t m = L.size(-2), n = U.size(-1), k = std::min(m, n);
  Tensor gA;
  if (m == n) {
    // gA = P L^-H [L^H gL o 1_L + gU U^H o 1_U] U^-H
    gA = add(tril(matmul(mH(L), gL), -1), triu(matmul(gU, mH(U))));
    gA = linalg::solve_triangular(mH(U), gA, /*upper=*/false, /*left=*/false);
    gA = linalg::solve_triangular(mH(L), gA, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
  } else if (m < n) {
    // Wide: A1 = P L^-H [gU1 + (L^H gL o 1_L - gU U^H o 1_U) U1^-H], A2 = P L^-H gU2
    const Tensor U1 = U.narrow(-1, 0, k);
    gA = sub(matmul(mH(L), gL), matmul(triu(gU), mH(U)));
    gA = linalg::solve_triangular(mH(U1), tril(gA, -1), /*upper=*/false, /*left=*/false);
    gA = cat({add(gA, triu(gU.narrow(-1, 0, k))), gU.narrow(-1, k, n - k)}, -1);
    gA = linalg::solve_triangular(mH(L), gA, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
  } else {
    // Tall: A1 = P [gL1 + L1^-H (gU U^H o 1_U - L^H gL o 1_L)] U^-H, A2 = P gL2 U^-H
    const Tensor L1 = L.narrow(-2, 0, k);
    gA = sub(matmul(gU, mH(U)), matmul(mH(L), tril(gL, -1)));
    gA = linalg::solve_triangular(mH(L1), triu(gA), /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
    gA = cat({add(gA, tril(gL.narrow(-2, 0, k), -1)), gL.narrow(-2, k, m - k)}, -2);
    gA = linalg::solve_triangular(mH(U), gA, /*upper=*/false, /*left=*/false);
  }
  return matmul(P, gA);
}

Tensor pinv_backward(const Tensor& g, const Tensor& pinvA, const Tensor& A) {
  const int64_t m = A.size(-2), n = A.size(-1);
  const Tensor pinvAh = mH(pinvA), gh = mH(g);
  // Ordered so that the intermediate matrices are the smaller ones.
  if (m <= n) {
    const Tensor K = matmul(gh, pinvA);
    const Tensor KpinvAh = matmul(K, pinvAh);
    Tensor r = sub(KpinvAh, mH(matmul(pinvA, K)));
    r = sub(r, matmul(matmul(A, pinvA), KpinvAh));
    return add(r, matmul(matmul(pinvAh, pinvA), sub(gh, matmul(K, A))));
  }
  const Tensor K = matmul(pinvA, gh);
  const Tensor pinvAhK = matmul(pinvAh, K);
  Tensor r = neg(mH(matmul(K, pinvA)));
  r = add(r, matmul(matmul(sub(gh, matmul(A, K)), pinvA), pinvAh));
  r = add(r, pinvAhK);
  return sub(r, matmul(matmul(pinvAhK, pinvA), A));
}

}  // namespace kiln::autograd::la
