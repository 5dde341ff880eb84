// linalg solvers against complex<double> references and identities: solve_triangular
// (both kernel paths, every flag, strides and broadcasting), LU, lu_solve, solve, inv,
// det, slogdet, the closed-form n <= 4 kernel and its fallbacks, and every error path.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/cpu/linalg/linalg_kernels.h"
#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/linalg.h"
#include "linalg_test_util.h"
#include "test_util.h"

using namespace kiln;
using namespace kiln::linalg_test;
using kiln::testing::expect_error;

namespace {

TEST(LinalgSolveTriangular, MatchesSubstitutionOnBothPathsEveryFlag) {
  for (DType dt : kLinalgDTypes) {
    for (int64_t n : {1, 7, 16, 17, 32, 64, 65, 130}) {
      for (int64_t k : {1, 8, 9, 33}) {
        for (int flags = 0; flags < 8; ++flags) {
          const bool upper = flags & 1, left = flags & 2, unit = flags & 4;
          const int64_t batch = 2;
          Tensor A = triangle(batch, n, dt, upper, unit, 100 + n);
          const int64_t rows = left ? n : k, cols = left ? k : n;
          Tensor B = random_tensor({batch, rows, cols}, dt, 200 + k);
          Tensor X = linalg::solve_triangular(A, B, upper, left, unit);
          ASSERT_EQ(X.sizes(), (Shape{batch, rows, cols}));
          const Values a = values(A), b = values(B), x = values(X);
          for (int64_t i = 0; i < batch; ++i) {
            const Values ref = triangular_ref(&a[i * n * n], &b[i * rows * cols], n, rows, cols, upper, left, unit);
            // Substitution is backward stable, |dT| <= n u |T| (Higham, Thm 8.5), so the
            // forward error is at most ~cond * n * u * |X| with cond < ~10 here.
            const double tol = 20.0 * n * eps_of(dt) * std::max(1.0, max_abs(ref));
            ASSERT_LE(max_diff(&x[i * rows * cols], ref.data(), rows * cols), tol)
                << dtype_name(dt) << " n=" << n << " k=" << k << " upper=" << upper << " left=" << left
                << " unit=" << unit;
          }
        }
      }
    }
  }
}

TEST(LinalgSolveTriangular, StridedAndBroadcastOperandsAndTheChunkedPrefillShape) {
  for (DType dt : {DType::Float32, DType::Complex128}) {
    for (int64_t n : {16, 32, 64, 100}) {
      // One A for a batch of 3x2 right-hand sides, read transposed (non-contiguous).
      Tensor At = triangle(1, n, dt, /*upper=*/true, false, 7).squeeze(0);
      Tensor A = At.transpose(0, 1);  // lower, column-major
      Tensor B = random_tensor({3, 2, n, 12}, dt, 9).transpose(-2, -1).contiguous().transpose(-2, -1);
      Tensor X = linalg::solve_triangular(A, B, /*upper=*/false);
      const Values a = values(A), b = values(B), x = values(X);
      for (int64_t i = 0; i < 6; ++i) {
        const Values ref = triangular_ref(a.data(), &b[i * n * 12], n, n, 12, false, true, false);
        ASSERT_LE(max_diff(&x[i * n * 12], ref.data(), n * 12), 20.0 * n * eps_of(dt) * max_abs(ref));
      }
    }
  }
  // 256 unit-lower 64x64 blocks, 8 right-hand sides each, over the pool.
  Tensor A = triangle(256, 64, DType::Float32, false, true, 11);
  Tensor B = random_tensor({256, 64, 8}, DType::Float32, 12);
  Tensor X = linalg::solve_triangular(A, B, false, true, true);
  const Values a = values(A), b = values(B), x = values(X);
  for (int64_t i = 0; i < 256; i += 37) {
    const Values ref = triangular_ref(&a[i * 4096], &b[i * 512], 64, 64, 8, false, true, true);
    ASSERT_LE(max_diff(&x[i * 512], ref.data(), 512), 20.0 * 64 * eps_of(DType::Float32) * max_abs(ref));
  }
}

// The kernel itself with strides no BLAS call can take (every other row of A, every
// other column of X), so both operands of the large path are packed, and with a
// broadcast A (batch stride 0).
TEST(LinalgSolveTriangular, KernelPacksOperandsOfAnyStride) {
  for (int64_t n : {40, 100}) {
    const int64_t k = 5;
    Tensor A = triangle(1, 2 * n, DType::Float64, false, false, 3).squeeze(0);  // read every other row/column
    Tensor B = random_tensor({2, n, 2 * k}, DType::Float64, 4);
    Tensor X = B.clone();
    const backend::TriangularSolveProblem p{DType::Float64, 2, n, k, A.data_ptr(), 0, 2 * (2 * n), 2,
                                            X.data_ptr(), n * 2 * k, 2 * k, 2, false, true, false};
    cpu::linalg::triangular_solve_cpu(current_context(), p);
    const Values a = values(A.slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 2));
    const Values b = values(B.slice(2, 0, std::nullopt, 2)), x = values(X.slice(2, 0, std::nullopt, 2));
    for (int64_t i = 0; i < 2; ++i) {
      const Values ref = triangular_ref(a.data(), &b[i * n * k], n, n, k, false, true, false);
      EXPECT_LE(max_diff(&x[i * n * k], ref.data(), n * k), 20.0 * n * eps_of(DType::Float64) * max_abs(ref)) << n;
    }
    // The untouched odd columns of X are B's.
    EXPECT_EQ(values(X.slice(2, 1, std::nullopt, 2)), values(B.slice(2, 1, std::nullopt, 2)));
  }
}

TEST(LinalgSolveTriangular, ZeroDiagonalGivesInfNotAnError) {
  Tensor A = zeros({2, 2}, DType::Float64);
  A.data<double>()[0] = 1.0;  // A = [[1, 0], [0, 0]]
  Tensor X = linalg::solve_triangular(A, ones({2, 1}, DType::Float64), false);
  EXPECT_EQ(X.data<double>()[0], 1.0);
  EXPECT_TRUE(std::isinf(X.data<double>()[1]));
}

TEST(LinalgSolveTriangular, Errors) {
  Tensor A = ones({3, 3}, DType::Float32);
  expect_error([&] { linalg::solve_triangular(ones({3, 4}), ones({3, 1}), true); }, ErrorKind::Runtime,
               "must be batches of square matrices, but they are 3 by 4 matrices");
  expect_error([&] { linalg::solve_triangular(A, ones({3, 1}, DType::Float64), true); }, ErrorKind::Runtime,
               "Expected A and B to have the same dtype");
  expect_error([&] { linalg::solve_triangular(A, ones({4, 1}), true); }, ErrorKind::Runtime,
               "Incompatible shapes of A and B for the equation AX = B (3x3 and 4x1)");
  expect_error([&] { linalg::solve_triangular(ones({3, 3}, DType::Int64), ones({3, 1}, DType::Int64), true); },
               ErrorKind::Runtime, "Expected a floating point or complex tensor as input. Got Long");
  expect_error([&] { linalg::solve_triangular(ones({2, 3, 3}), ones({3, 3, 1}), true); }, ErrorKind::Runtime, "");
  EXPECT_EQ(linalg::solve_triangular(A, ones({0, 3, 5}), true).sizes(), (Shape{0, 3, 5}));
}

// Row-major reconstruction helpers over one matrix of a batch.
Values slice(const Values& v, int64_t index, int64_t count) {
  return Values(v.begin() + index * count, v.begin() + (index + 1) * count);
}

TEST(LinalgLu, ReconstructsAndPivotsLikePartialPivoting) {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {3, 3}, {8, 8}, {9, 9}, {20, 20}, {5, 3}, {3, 5}, {12, 7}};
  for (DType dt : kLinalgDTypes) {
    for (auto [m, n] : shapes) {
      const int64_t k = std::min(m, n);
      Tensor A = random_tensor({2, m, n}, dt, 31 * m + n);
      linalg::LuResult r = linalg::lu(A);
      const Values a = values(A), p = values(r.P), l = values(r.L), u = values(r.U);
      for (int64_t b = 0; b < 2; ++b) {
        const Values lu = matmul_ref(&l[b * m * k], &u[b * k * n], m, k, n);
        const Values plu = matmul_ref(&p[b * m * m], lu.data(), m, m, n);
        // |A - PLU| <= gamma_n |L||U| (Higham, Thm 9.3); partial pivoting keeps |L| <= 1
        // and the growth of U small for random matrices.
        EXPECT_LE(max_diff(plu.data(), &a[b * m * n], m * n), 10.0 * k * eps_of(dt) * max_abs(a) * std::sqrt(k))
            << dtype_name(dt) << " " << m << "x" << n;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = i + 1; j < k; ++j) ASSERT_EQ(l[b * m * k + i * k + j], cd(0));
      }
      linalg::LuFactorResult f = linalg::lu_factor(A);
      ASSERT_EQ(f.pivots.dtype(), DType::Int32);
      ASSERT_EQ(f.pivots.sizes(), (Shape{2, k}));
      for (int64_t i = 0; i < 2 * k; ++i) {
        const int32_t piv = f.pivots.contiguous().data<int32_t>()[i];
        EXPECT_GE(piv, (i % k) + 1);
        EXPECT_LE(piv, m);
      }
    }
  }
}

TEST(LinalgSolve, LeftRightAdjointVectorAndBroadcastResiduals) {
  for (DType dt : kLinalgDTypes) {
    for (int64_t n : {1, 2, 3, 4, 5, 9, 33}) {
      Tensor A = well_conditioned({3, n, n}, dt, 5 + n);
      const Values a = values(A);
      // cond < ~10: |X - X*| <= ~cond * n * u * |X| for a backward-stable solve.
      const double tol = 100.0 * n * eps_of(dt);
      Tensor B = random_tensor({3, n, 4}, dt, 6);
      const Values b = values(B);
      const Values x = values(linalg::solve(A, B));
      const Values xr = values(linalg::solve(A, B.transpose(-2, -1).contiguous(), /*left=*/false));
      for (int64_t i = 0; i < 3; ++i) {
        const Values ax = matmul_ref(&a[i * n * n], &x[i * n * 4], n, n, 4);
        EXPECT_LE(max_diff(ax.data(), &b[i * n * 4], n * 4), tol * max_abs(b) * n) << dtype_name(dt) << " n=" << n;
        const Values bt = conj_transpose(&b[i * n * 4], n, 4);  // Bᵀ up to conjugation
        const Values xa = matmul_ref(&xr[i * 4 * n], &a[i * n * n], 4, n, n);
        Values btr(bt.size());
        for (size_t e = 0; e < bt.size(); ++e) btr[e] = std::conj(bt[e]);
        EXPECT_LE(max_diff(xa.data(), btr.data(), 4 * n), tol * max_abs(b) * n);
      }
      // lu_solve with adjoint: Aᴴ X = B.
      linalg::LuFactorResult f = linalg::lu_factor(A);
      const Values xh = values(linalg::lu_solve(f.LU, f.pivots, B, true, /*adjoint=*/true));
      for (int64_t i = 0; i < 3; ++i) {
        const Values ah = conj_transpose(&a[i * n * n], n, n);
        const Values ahx = matmul_ref(ah.data(), &xh[i * n * 4], n, n, 4);
        EXPECT_LE(max_diff(ahx.data(), &b[i * n * 4], n * 4), tol * max_abs(b) * n);
      }
      // A vector right-hand side and one A broadcast over a batch of B.
      Tensor v = random_tensor({3, n}, dt, 8);
      EXPECT_EQ(linalg::solve(A, v).sizes(), (Shape{3, n}));
      EXPECT_EQ(linalg::solve(A.select(0, 0), random_tensor({5, n, 2}, dt, 9)).sizes(), (Shape{5, n, 2}));
    }
  }
}

TEST(LinalgInvDet, IdentitiesAndReferenceDeterminantsAcrossTheClosedFormBoundary) {
  for (DType dt : kLinalgDTypes) {
    for (int64_t n : {1, 2, 3, 4, 5, 6, 9}) {
      const int64_t batch = 37;  // not a multiple of the closed form's 16 lanes
      Tensor A = well_conditioned({batch, n, n}, dt, 40 + n);
      const Values a = values(A), inv = values(linalg::inv(A)), det = values(linalg::det(A));
      linalg::SlogdetResult sl = linalg::slogdet(A);
      const Values sign = values(sl.sign), logabs = values(sl.logabsdet);
      for (int64_t b = 0; b < batch; ++b) {
        const Values prod = matmul_ref(&a[b * n * n], &inv[b * n * n], n, n, n);
        EXPECT_LE(identity_error(prod, n), 100.0 * n * eps_of(dt)) << dtype_name(dt) << " n=" << n;
        const cd ref = det_ref(slice(a, b, n * n), n);
        // det is a product of n pivots: relative error ~ n u (times cond for cofactors).
        EXPECT_LE(std::abs(det[b] - ref), 100.0 * n * eps_of(dt) * std::abs(ref));
        EXPECT_LE(std::abs(sign[b] * std::exp(logabs[b].real()) - ref), 100.0 * n * eps_of(dt) * std::abs(ref));
      }
    }
  }
}

TEST(LinalgInvDet, SingularNearSingularNanAndEmpty) {
  for (DType dt : kLinalgDTypes) {
    // Batch element 1 is [[1,2,3],[2,4,6],[1,1,1]]: partial pivoting meets an exact zero
    // at U[3,3], and in its transpose at U[2,2]. inv factors Aᵀ for contiguous real input
    // (as PyTorch), A otherwise: info 2 or 3, the same on the closed-form path (its LU
    // fallback) and on LAPACK's.
    const int32_t expected = is_complex(dt) ? 3 : 2;
    Values v = values(well_conditioned({3, 3, 3}, dt, 3));
    const Values singular = {1, 2, 3, 2, 4, 6, 1, 1, 1};
    std::copy(singular.begin(), singular.end(), v.begin() + 9);
    Tensor A = from_values(v, {3, 3, 3}, dt);
    linalg::InvExResult r = linalg::inv_ex(A);
    EXPECT_EQ(r.info.contiguous().data<int32_t>()[0], 0);
    EXPECT_EQ(r.info.contiguous().data<int32_t>()[1], expected);
    try {
      linalg::inv(A);
      ADD_FAILURE() << "expected LinAlgError";
    } catch (const linalg::LinAlgError& e) {
      EXPECT_EQ(e.batch_index(), 1);
      EXPECT_EQ(e.info(), expected);
      EXPECT_NE(std::string(e.what()).find(fmt::format("linalg.inv: (Batch element 1): The diagonal element {} is zero",
                                                       expected)),
                std::string::npos)
          << e.what();
    }
    expect_error([&] { linalg::solve(A, ones({3, 3, 1}, dt)); }, ErrorKind::Runtime,
                 "linalg.solve: (Batch element 1): The solver failed because the input matrix is singular.");
    EXPECT_EQ(values(linalg::det(A))[1], cd(0));
    EXPECT_EQ(values(linalg::slogdet(A).sign)[1], cd(0));
    EXPECT_TRUE(std::isinf(values(linalg::slogdet(A).logabsdet)[1].real()));
    // The same matrix padded to 6x6 goes through LAPACK: the same info.
    Values big(36, 0);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) big[i * 6 + j] = singular[i * 3 + j];
    for (int i = 3; i < 6; ++i) big[i * 6 + i] = 1;
    EXPECT_EQ(linalg::inv_ex(from_values(big, {6, 6}, dt)).info.item().to_int64(), expected);
    EXPECT_EQ(linalg::solve_ex(from_values(big, {6, 6}, dt), ones({6, 2}, dt)).info.item().to_int64(), expected);
    // Read through a transposed view (not contiguous), A itself is factored: info 3.
    Tensor At = from_values(v, {3, 3, 3}, dt).transpose(-2, -1).contiguous().transpose(-2, -1);
    EXPECT_EQ(linalg::inv_ex(At).info.contiguous().data<int32_t>()[1], 3);
  }
  // Scales whose cofactors under- or overflow float32 take the LU fallback and still
  // invert: det = 1e-120 or 1e120 is out of float32's range, the inverse is not.
  for (double scale : {1e-30, 1e30}) {
    Tensor A = well_conditioned({5, 4, 4}, DType::Float64, 77);
    Values v = values(A);
    for (cd& x : v) x *= scale;
    Tensor As = from_values(v, {5, 4, 4}, DType::Float32);
    const Values a = values(As), inv = values(linalg::inv(As));
    for (int64_t b = 0; b < 5; ++b) {
      const Values prod = matmul_ref(&a[b * 16], &inv[b * 16], 4, 4, 4);
      EXPECT_LE(identity_error(prod, 4), 400.0 * eps_of(DType::Float32)) << scale;
    }
  }
  // NaN propagates, without an error.
  Tensor N = well_conditioned({2, 2}, DType::Float32, 1);
  N.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(linalg::det(N).item().to_double()));
  int nans = 0;
  for (const cd& x : values(linalg::inv(N))) nans += std::isnan(x.real());
  EXPECT_GT(nans, 0);
  // Empty matrices and batches.
  EXPECT_EQ(linalg::inv(ones({0, 3, 3})).sizes(), (Shape{0, 3, 3}));
  EXPECT_EQ(linalg::inv(ones({2, 0, 0})).sizes(), (Shape{2, 0, 0}));
  EXPECT_EQ(values(linalg::det(ones({2, 0, 0}))), (Values{1, 1}));
  EXPECT_EQ(linalg::det(ones({0, 5, 5})).sizes(), (Shape{0}));
  EXPECT_EQ(linalg::solve(well_conditioned({2, 3, 3}, DType::Float32, 1), ones({2, 3, 0})).sizes(), (Shape{2, 3, 0}));
  EXPECT_EQ(linalg::lu_factor(ones({0, 4, 2})).pivots.sizes(), (Shape{0, 2}));
}

TEST(LinalgInvDet, Errors) {
  expect_error([&] { linalg::inv(ones({3})); }, ErrorKind::Runtime, "The input tensor A must have at least 2 dimensions.");
  expect_error([&] { linalg::inv(ones({2, 3})); }, ErrorKind::Runtime,
               "linalg.inv_ex: A must be batches of square matrices, but they are 2 by 3 matrices");
  expect_error([&] { linalg::det(ones({2, 2}, DType::Int32)); }, ErrorKind::Runtime,
               "Expected a floating point or complex tensor as input. Got Int");
  expect_error([&] { linalg::det(ones({2, 2}, DType::Float16)); }, ErrorKind::Runtime,
               "Low precision dtypes not supported. Got Half");
  expect_error([&] { linalg::solve(ones({2, 3, 3}), ones({3, 3, 1})); }, ErrorKind::Runtime, "");
  expect_error([&] { linalg::lu_factor(ones({3, 3}), false); }, ErrorKind::Runtime,
               "LU without pivoting is not implemented on the CPU");
  linalg::LuFactorResult f = linalg::lu_factor(well_conditioned({3, 3}, DType::Float32, 2));
  expect_error([&] { linalg::lu_solve(f.LU, f.pivots.to(DType::Int64), ones({3, 1})); }, ErrorKind::Runtime,
               "pivots should be a Tensor of scalar type Int");
  expect_error([&] { linalg::lu_solve(f.LU, full({3}, Scalar(int64_t{7}), DType::Int32), ones({3, 1})); },
               ErrorKind::Runtime, "pivots must be between 1 and 3");
  expect_error([&] { linalg::lu_factor(zeros({2, 2})); }, ErrorKind::Runtime,
               "torch.linalg.lu_factor: U[1,1] is zero");
}

}  // namespace
