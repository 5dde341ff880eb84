// linalg decompositions through their identities (factors are unique only up to signs
// and phases, so Q, U, V are never compared entry by entry): cholesky, qr, svd, eigh,
// pinv, lstsq; extreme scales, rank deficiency, non-finite and empty input, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/ops/creation.h"
#include "kiln/ops/linalg.h"
#include "linalg_test_util.h"
#include "test_util.h"

using namespace kiln;
using namespace kiln::linalg_test;
using kiln::testing::expect_error;

namespace {

// Q (m x k) with orthonormal columns: |QᴴQ - I|.
double orthonormality_error(const cd* q, int64_t m, int64_t k) {
  const Values qh = conj_transpose(q, m, k);
  return identity_error(matmul_ref(qh.data(), q, k, m, k), k);
}

// M Mᴴ + n I: Hermitian positive definite with cond < ~10.
Tensor hpd(int64_t batch, int64_t n, DType dt, uint64_t seed) {
  const Values m = values(random_tensor({batch, n, n}, is_complex(dt) ? DType::Complex128 : DType::Float64, seed));
  Values out(static_cast<size_t>(batch * n * n));
  for (int64_t b = 0; b < batch; ++b) {
    const Values mh = conj_transpose(&m[b * n * n], n, n);
    const Values p = matmul_ref(&m[b * n * n], mh.data(), n, n, n);
    for (int64_t e = 0; e < n * n; ++e) out[b * n * n + e] = p[e] + (e % (n + 1) == 0 ? cd(3.0 * n) : cd(0));
  }
  return from_values(out, {batch, n, n}, dt);
}

TEST(LinalgCholesky, FactorsReconstructAndOtherTriangleIsZero) {
  for (DType dt : kLinalgDTypes) {
    for (int64_t n : {1, 4, 17}) {
      Tensor A = hpd(2, n, dt, n);
      const Values a = values(A);
      for (bool upper : {false, true}) {
        const Values l = values(linalg::cholesky(A, upper));
        for (int64_t b = 0; b < 2; ++b) {
          const Values lh = conj_transpose(&l[b * n * n], n, n);
          const Values p = upper ? matmul_ref(lh.data(), &l[b * n * n], n, n, n)
                                 : matmul_ref(&l[b * n * n], lh.data(), n, n, n);
          // |A - LLᴴ| <= (n+1) u |L||Lᴴ| (Higham, Thm 10.3).
          EXPECT_LE(max_diff(p.data(), &a[b * n * n], n * n), 10.0 * (n + 1) * eps_of(dt) * max_abs(a));
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j)
              if (upper ? i > j : i < j) ASSERT_EQ(l[b * n * n + i * n + j], cd(0));
        }
      }
    }
  }
  Values v = values(hpd(3, 4, DType::Float64, 1));
  v[16 + 5] = -100;  // batch element 1 loses definiteness at its second leading minor
  Tensor bad = from_values(v, {3, 4, 4}, DType::Float64);
  EXPECT_EQ(values(linalg::cholesky_ex(bad).info)[1], cd(2));
  expect_error([&] { linalg::cholesky(bad); }, ErrorKind::Runtime,
               "linalg.cholesky: (Batch element 1): The factorization could not be completed because the input is not "
               "positive-definite (the leading minor of order 2 is not positive-definite).");
}

TEST(LinalgQr, EveryModeReconstructsWithOrthonormalQ) {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {5, 5}, {7, 3}, {3, 7}, {20, 11}};
  for (DType dt : kLinalgDTypes) {
    for (auto [m, n] : shapes) {
      const int64_t k = std::min(m, n);
      Tensor A = random_tensor({2, m, n}, dt, m * 10 + n);
      const Values a = values(A);
      for (const char* mode : {"reduced", "complete"}) {
        const int64_t qc = std::string(mode) == "complete" ? m : k;
        linalg::QrResult r = linalg::qr(A, mode);
        ASSERT_EQ(r.Q.sizes(), (Shape{2, m, qc}));
        ASSERT_EQ(r.R.sizes(), (Shape{2, qc, n}));
        const Values q = values(r.Q), rr = values(r.R);
        for (int64_t b = 0; b < 2; ++b) {
          // Householder QR: |A - QR| <= ~m n u |A| (Higham, Thm 19.4).
          const Values qr = matmul_ref(&q[b * m * qc], &rr[b * qc * n], m, qc, n);
          EXPECT_LE(max_diff(qr.data(), &a[b * m * n], m * n), 10.0 * m * n * eps_of(dt) * max_abs(a));
          EXPECT_LE(orthonormality_error(&q[b * m * qc], m, qc), 10.0 * m * eps_of(dt));
          for (int64_t i = 0; i < qc; ++i)
            for (int64_t j = 0; j < std::min(i, n); ++j) ASSERT_EQ(rr[b * qc * n + i * n + j], cd(0));
        }
      }
      linalg::QrResult r = linalg::qr(A, "r");
      EXPECT_EQ(r.Q.numel(), 0);
      EXPECT_EQ(r.R.sizes(), (Shape{2, k, n}));
    }
  }
  expect_error([] { linalg::qr(ones({2, 2}), "raw"); }, ErrorKind::Runtime,
               "qr received unrecognized mode 'raw' but expected one of 'reduced' (default), 'r', or 'complete'");
}

// U diag(S) Vh against A, orthonormal U and Vh rows, S real, descending, >= 0.
void check_svd(const Tensor& A, bool full, double tol_scale) {
  const DType dt = A.dtype();
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const int64_t batch = A.numel() / std::max<int64_t>(1, m * n);
  linalg::SvdResult r = linalg::svd(A, full);
  const int64_t uc = full ? m : k, vr = full ? n : k;
  ASSERT_EQ(r.U.sizes().back(), uc);
  ASSERT_EQ(r.Vh.sizes()[r.Vh.dim() - 2], vr);
  ASSERT_EQ(r.S.dtype(), to_real(dt));
  const Values a = values(A), u = values(r.U), s = values(r.S), vh = values(r.Vh);
  const Values sv = values(linalg::svdvals(A));
  const double scale = std::max(max_abs(a), std::numeric_limits<double>::min());
  for (int64_t b = 0; b < batch; ++b) {
    Values us(static_cast<size_t>(m * k));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) us[i * k + j] = u[b * m * uc + i * uc + j] * s[b * k + j];
    Values vhk(vh.begin() + b * vr * n, vh.begin() + b * vr * n + k * n);
    const Values rec = matmul_ref(us.data(), vhk.data(), m, k, n);
    // A backward-stable SVD: |A - U S Vh| <= ~max(m, n) u |A|.
    EXPECT_LE(max_diff(rec.data(), &a[b * m * n], m * n) / scale, tol_scale * std::max(m, n) * eps_of(dt))
        << dtype_name(dt) << " " << m << "x" << n;
    EXPECT_LE(orthonormality_error(&u[b * m * uc], m, uc), tol_scale * std::max(m, n) * eps_of(dt));
    const Values v = conj_transpose(&vh[b * vr * n], vr, n);
    EXPECT_LE(orthonormality_error(v.data(), n, vr), tol_scale * std::max(m, n) * eps_of(dt));
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_GE(s[b * k + j].real(), 0.0);
      if (j > 0) EXPECT_LE(s[b * k + j].real(), s[b * k + j - 1].real());
      EXPECT_LE(std::abs(sv[b * k + j] - s[b * k + j]), tol_scale * std::max(m, n) * eps_of(dt) * scale);
    }
  }
}

TEST(LinalgSvd, ReconstructsReducedAndFullIncludingRankDeficientAndExtremeScales) {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {4, 4}, {7, 3}, {3, 7}, {16, 16}};
  for (DType dt : kLinalgDTypes) {
    for (auto [m, n] : shapes) {
      Tensor A = random_tensor({2, m, n}, dt, 3 * m + n);
      check_svd(A, true, 20);
      check_svd(A, false, 20);
    }
    // Rank 2: a 6x2 times 2x5 product has three zero singular values (to rounding).
    const Values f = values(random_tensor({6, 2}, dt, 1)), g = values(random_tensor({2, 5}, dt, 2));
    Tensor low = from_values(matmul_ref(f.data(), g.data(), 6, 2, 5), {6, 5}, dt);
    check_svd(low, true, 20);
    const Values s = values(linalg::svdvals(low));
    for (int j = 2; j < 5; ++j) EXPECT_LE(s[j].real(), 50.0 * eps_of(dt) * s[0].real());
    // 1e-30 .. 1e30: the singular values scale exactly, nothing over- or underflows.
    const Values base = values(linalg::svdvals(random_tensor({5, 4}, dt, 9)));
    for (double scale : {1e-30, 1e30}) {
      Values v = values(random_tensor({5, 4}, dt, 9));
      for (cd& x : v) x *= scale;
      Tensor As = from_values(v, {5, 4}, dt);
      check_svd(As, false, 20);
      const Values ss = values(linalg::svdvals(As));
      for (int j = 0; j < 4; ++j) {
        EXPECT_TRUE(std::isfinite(ss[j].real()));
        EXPECT_NEAR(ss[j].real() / scale, base[j].real(), 50.0 * eps_of(dt) * base[0].real()) << scale;
      }
    }
  }
}

TEST(LinalgSvd, NonFiniteAndEmpty) {
  Tensor A = ones({2, 3, 3});
  A.data<float>()[9 + 4] = std::numeric_limits<float>::infinity();
  expect_error([&] { linalg::svd(A); }, ErrorKind::Runtime,
               "linalg.svd: (Batch element 1): The algorithm failed to converge because the input matrix contained "
               "non-finite values.");
  linalg::SvdResult e = linalg::svd(ones({2, 0, 3}), true);
  EXPECT_EQ(e.S.sizes(), (Shape{2, 0}));
  EXPECT_EQ(e.U.sizes(), (Shape{2, 0, 0}));
  EXPECT_EQ(values(e.Vh), values(eye(3).expand({2, 3, 3})));
  EXPECT_EQ(linalg::svd(ones({2, 0, 3}), false).Vh.sizes(), (Shape{2, 0, 3}));
  EXPECT_EQ(linalg::svdvals(ones({0, 4, 3})).sizes(), (Shape{0, 3}));
}

TEST(LinalgEigh, EigenpairsAscendingReadingOneTriangle) {
  for (DType dt : kLinalgDTypes) {
    for (int64_t n : {1, 3, 12}) {
      Tensor A = hpd(2, n, dt, 5 + n);
      Values a = values(A);
      for (bool upper : {false, true}) {
        // NaN in the triangle not read proves it is not read.
        Values poisoned = a;
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j)
              if (upper ? i > j : i < j) poisoned[b * n * n + i * n + j] = std::numeric_limits<double>::quiet_NaN();
        linalg::EighResult r = linalg::eigh(from_values(poisoned, {2, n, n}, dt), upper ? "U" : "L");
        const Values w = values(r.eigenvalues), v = values(r.eigenvectors);
        for (int64_t b = 0; b < 2; ++b) {
          const Values av = matmul_ref(&a[b * n * n], &v[b * n * n], n, n, n);
          double err = 0;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) err = std::max(err, std::abs(av[i * n + j] - v[b * n * n + i * n + j] * w[b * n + j]));
          EXPECT_LE(err, 20.0 * n * eps_of(dt) * max_abs(a)) << dtype_name(dt) << " n=" << n;
          EXPECT_LE(orthonormality_error(&v[b * n * n], n, n), 20.0 * n * eps_of(dt));
          for (int64_t j = 1; j < n; ++j) EXPECT_LE(w[b * n + j - 1].real(), w[b * n + j].real());
        }
        EXPECT_EQ(values(linalg::eigvalsh(from_values(poisoned, {2, n, n}, dt), upper ? "U" : "L")).size(), w.size());
      }
    }
  }
  expect_error([] { linalg::eigh(ones({2, 2}), "X"); }, ErrorKind::Runtime,
               "Expected UPLO argument to be 'L' or 'U', but got X");
}

// The Moore-Penrose conditions A X A = A and X A X = X.
void check_pinv(const Tensor& A, const Tensor& X, double tol) {
  const int64_t m = A.size(-2), n = A.size(-1);
  const Values a = values(A), x = values(X);
  const Values ax = matmul_ref(a.data(), x.data(), m, n, m);
  const Values axa = matmul_ref(ax.data(), a.data(), m, m, n);
  const Values xa = matmul_ref(x.data(), a.data(), n, m, n);
  const Values xax = matmul_ref(xa.data(), x.data(), n, n, m);
  EXPECT_LE(max_diff(axa.data(), a.data(), m * n), tol * max_abs(a));
  EXPECT_LE(max_diff(xax.data(), x.data(), m * n), tol * max_abs(x));
}

TEST(LinalgPinv, MoorePenroseFullAndRankDeficientHermitianAndTolerances) {
  for (DType dt : kLinalgDTypes) {
    const double tol = 1e3 * eps_of(dt);
    check_pinv(random_tensor({6, 4}, dt, 1), linalg::pinv(random_tensor({6, 4}, dt, 1)), tol);
    check_pinv(random_tensor({3, 5}, dt, 2), linalg::pinv(random_tensor({3, 5}, dt, 2)), tol);
    const Values f = values(random_tensor({5, 2}, dt, 3)), g = values(random_tensor({2, 4}, dt, 4));
    Tensor low = from_values(matmul_ref(f.data(), g.data(), 5, 2, 4), {5, 4}, dt);
    check_pinv(low, linalg::pinv(low), tol);
    Tensor H = hpd(1, 5, dt, 6).squeeze(0);
    check_pinv(H, linalg::pinv(H, std::optional<double>(), std::optional<double>(), /*hermitian=*/true), tol);
    // atol above every singular value drops them all.
    EXPECT_EQ(max_abs(values(linalg::pinv(low, 1e10))), 0.0);
    EXPECT_EQ(linalg::pinv(ones({2, 0, 3}, dt)).sizes(), (Shape{2, 3, 0}));
  }
}

TEST(LinalgLstsq, EveryDriverSolvesTheNormalEquationsWithPyTorchsExtras) {
  for (DType dt : kLinalgDTypes) {
    const int64_t m = 9, n = 4, k = 3;
    Tensor A = random_tensor({2, m, n}, dt, 1), B = random_tensor({2, m, k}, dt, 2);
    const Values a = values(A), b = values(B);
    for (const char* driver : {"gelsy", "gels", "gelsd", "gelss"}) {
      linalg::LstsqResult r = linalg::lstsq(A, B, std::nullopt, driver);
      ASSERT_EQ(r.solution.sizes(), (Shape{2, n, k}));
      const Values x = values(r.solution);
      for (int64_t bi = 0; bi < 2; ++bi) {
        Values res = matmul_ref(&a[bi * m * n], &x[bi * n * k], m, n, k);
        for (int64_t e = 0; e < m * k; ++e) res[e] -= b[bi * m * k + e];
        const Values ah = conj_transpose(&a[bi * m * n], m, n);
        const Values normal = matmul_ref(ah.data(), res.data(), n, m, k);
        EXPECT_LE(max_abs(normal), 200.0 * m * eps_of(dt) * max_abs(a) * max_abs(b)) << driver;
        if (std::string(driver) != "gelsy") {
          for (int64_t c = 0; c < k; ++c) {
            double ss = 0;
            for (int64_t i = 0; i < m; ++i) ss += std::norm(res[i * k + c]);
            EXPECT_NEAR(values(r.residuals)[bi * k + c].real(), ss, 200.0 * m * eps_of(dt) * (1 + ss)) << driver;
          }
        } else {
          EXPECT_EQ(r.residuals.numel(), 0);
        }
      }
      const std::string d = driver;
      EXPECT_EQ(r.rank.numel(), d == "gels" ? 0 : 2);
      if (d != "gels") EXPECT_EQ(values(r.rank), (Values{4, 4}));
      EXPECT_EQ(r.singular_values.numel(), d == "gelsd" || d == "gelss" ? 2 * n : 0);
    }
    // Rank-deficient (a zero column): the rank-revealing drivers report rank 3; gels
    // raises as PyTorch does; no residuals for gelsd when not every matrix is full rank.
    Values az = a;
    for (int64_t i = 0; i < m; ++i) az[i * n + 2] = 0;
    Tensor Z = from_values(Values(az.begin(), az.begin() + m * n), {m, n}, dt);
    Tensor Bz = B.select(0, 0);
    EXPECT_EQ(linalg::lstsq(Z, Bz, std::nullopt, "gelsy").rank.item().to_int64(), 3);
    linalg::LstsqResult rd = linalg::lstsq(Z, Bz, std::nullopt, "gelsd");
    EXPECT_EQ(rd.rank.item().to_int64(), 3);
    EXPECT_EQ(rd.residuals.numel(), 0);
    expect_error([&] { linalg::lstsq(Z, Bz, std::nullopt, "gels"); }, ErrorKind::Runtime,
                 "torch.linalg.lstsq: The least squares solution could not be computed because the input matrix does "
                 "not have full rank (error code: 3).");
    // A vector right-hand side.
    EXPECT_EQ(linalg::lstsq(Z, random_tensor({m}, dt, 5)).solution.sizes(), (Shape{n}));
  }
  expect_error([] { linalg::lstsq(ones({3, 2}), ones({3, 1}), std::nullopt, "gelsx"); }, ErrorKind::Runtime,
               "parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  expect_error([] { linalg::lstsq(ones({3, 2}), ones({3, 1}, DType::Float64)); }, ErrorKind::Runtime,
               "Expected input and other to have the same dtype");
  expect_error([] { linalg::lstsq(ones({3, 2}), ones({4, 1})); }, ErrorKind::Runtime,
               "input.size(-2) should match other.size(-2)");
  expect_error([] { linalg::lstsq(ones({3, 2}), ones({1, 3, 1})); }, ErrorKind::Runtime,
               "input.dim() must be greater or equal to other.dim()");
}

}  // namespace
