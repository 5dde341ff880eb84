// gradcheck and gradgradcheck of the linear-algebra backward formulas in float64 and
// complex128 (the conjugate convention is what gradcheck's separate real and imaginary
// perturbations check), on well-conditioned, batched and non-contiguous inputs, with
// losses that do not depend on the arbitrary signs/phases of singular vectors and
// eigenvectors; plus PyTorch's errors where the derivative is ill-defined.
#include <gtest/gtest.h>

#include "autograd_test_util.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace autograd_test;
using autograd::conj;
using V = std::vector<Tensor>;
using kiln::testing::expect_error;
using linalg::LinAlgError;

const DType kDtypes[] = {DType::Float64, DType::Complex128};

// Gradients through LAPACK factorisations carry their rounding (~1e-12 relative) into
// central differences with eps 1e-6: 1e-5 absolute leaves a wide margin above that.
constexpr double kAtol = 1e-5;

// A well-conditioned (diagonally dominant) square batch: A + n I.
Tensor dominant(const Tensor& a) {
  const int64_t n = a.size(-1);
  return add(a, mul(eye(n, n, DType::Float64), Scalar(static_cast<double>(n) + 2.0)));
}
Tensor mH(const Tensor& x) { return conj(x).transpose(-2, -1); }
// A Hermitian positive-definite batch from any square one.
Tensor hpd(const Tensor& a) { return dominant(matmul(a, mH(a))); }
Tensor hermitian(const Tensor& a) { return add(a, mH(a)); }

TEST(AutogradLinalg, DetSlogdetInv) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = transposed_leaf({2, 3, 3}, 1, dt);
    expect_gradcheck(one([](const Tensor& x) { return linalg::det(dominant(x)); }), {a}, kAtol);
    // Order > 4 takes the LU path instead of the closed form.
    expect_gradcheck(one([](const Tensor& x) { return linalg::det(dominant(x)); }), {leaf({6, 6}, 2, dt)}, kAtol);
    expect_gradcheck(one([](const Tensor& x) { return linalg::slogdet(dominant(x)).logabsdet; }), {a}, kAtol);
    expect_gradcheck(one([](const Tensor& x) { return linalg::inv(dominant(x)); }), {a}, kAtol);
    expect_gradgradcheck(one([](const Tensor& x) { return linalg::det(dominant(x)); }), {leaf({3, 3}, 3, dt)}, 1e-4);
    expect_gradgradcheck(one([](const Tensor& x) { return linalg::inv(dominant(x)); }), {leaf({3, 3}, 4, dt)}, 1e-4);
  }
  // The sign of a complex determinant is differentiable (PyTorch's formula).
  expect_gradcheck(one([](const Tensor& x) { return linalg::slogdet(dominant(x)).sign; }),
                   {leaf({2, 4, 4}, 5, DType::Complex128)}, kAtol);
}

TEST(AutogradLinalg, DetOfSingularMatrixGoesThroughTheSvd) {
  // A rank-2 3x3 matrix: det is 0 and its gradient the adjugate (cofactor matrix).
  Tensor a = Tensor::empty({3, 3}, DType::Float64);
  const double v[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::copy(v, v + 9, a.data<double>());
  a.requires_grad_();
  autograd::backward({linalg::det(a)});
  const double cofactor[] = {-3, 6, -3, 6, -12, 6, -3, 6, -3};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(a.grad().data<double>()[i], cofactor[i], 1e-9) << i;
}

TEST(AutogradLinalg, Solve) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = transposed_leaf({2, 3, 3}, 10, dt);
    const Tensor b = leaf({3, 2}, 11, dt);  // broadcast over A's batch
    const Tensor bt = leaf({2, 2, 3}, 12, dt);
    const Tensor vec = leaf({3}, 13, dt);
    const auto solve = [](bool left) {
      return two([left](const Tensor& x, const Tensor& y) { return linalg::solve(dominant(x), y, left); });
    };
    expect_gradcheck(solve(true), {a, b}, kAtol);
    expect_gradcheck(solve(false), {a, bt}, kAtol);
    expect_gradcheck(solve(true), {a, vec}, kAtol);  // a batch of vector right-hand sides
    // Order 6: the LU path rather than the closed form.
    expect_gradcheck(solve(true), {leaf({6, 6}, 14, dt), leaf({6, 2}, 15, dt)}, kAtol);
    expect_gradgradcheck(solve(true), {leaf({3, 3}, 16, dt), leaf({3, 2}, 17, dt)}, 1e-4);
  }
}

TEST(AutogradLinalg, SolveTriangular) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = transposed_leaf({2, 4, 4}, 20, dt);
    const Tensor b = leaf({2, 4, 3}, 21, dt);
    const Tensor bt = leaf({3, 4}, 22, dt);
    for (bool upper : {true, false}) {
      for (bool unit : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "upper " << upper << " unitriangular " << unit);
        expect_gradcheck(two([=](const Tensor& x, const Tensor& y) {
                           return linalg::solve_triangular(dominant(x), y, upper, true, unit);
                         }),
                         {a, b}, kAtol);
        expect_gradcheck(two([=](const Tensor& x, const Tensor& y) {
                           return linalg::solve_triangular(dominant(x), y, upper, false, unit);
                         }),
                         {a, bt}, kAtol);
      }
    }
    expect_gradgradcheck(two([](const Tensor& x, const Tensor& y) {
                           return linalg::solve_triangular(dominant(x), y, true, true, false);
                         }),
                         {leaf({3, 3}, 23, dt), leaf({3, 2}, 24, dt)}, 1e-4);
  }
}

TEST(AutogradLinalg, Cholesky) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = transposed_leaf({2, 4, 4}, 30, dt);
    expect_gradcheck(one([](const Tensor& x) { return linalg::cholesky(hpd(x)); }), {a}, kAtol);
    expect_gradcheck(one([](const Tensor& x) { return linalg::cholesky(hpd(x), true); }), {a}, kAtol);
    expect_gradgradcheck(one([](const Tensor& x) { return linalg::cholesky(hpd(x)); }), {leaf({3, 3}, 31, dt)},
                         1e-4);
  }
}

TEST(AutogradLinalg, LuFactorLuAndLuSolve) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    for (const Shape& s : {Shape{2, 4, 4}, Shape{3, 5}, Shape{5, 3}}) {
      SCOPED_TRACE(shape_to_string(s));
      const Tensor a = leaf(s, 40, dt);
      expect_gradcheck(one([](const Tensor& x) { return linalg::lu_factor(x).LU; }), {a}, kAtol);
      expect_gradcheck([](const V& x) {
        linalg::LuResult r = linalg::lu(x[0]);
        return V{r.L, r.U};
      }, {a}, kAtol);
    }
    // lu_solve with respect to LU and B, every left/adjoint combination.
    const Tensor A = dominant(leaf({2, 4, 4}, 41, dt)).detach();
    const linalg::LuFactorResult f = linalg::lu_factor(A);
    const Tensor lu = f.LU.clone().requires_grad_();
    for (bool left : {true, false}) {
      for (bool adjoint : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "left " << left << " adjoint " << adjoint);
        const Tensor b = leaf(left ? Shape{2, 4, 3} : Shape{2, 3, 4}, 42, dt);
        const Tensor pivots = f.pivots;
        expect_gradcheck(two([=](const Tensor& x, const Tensor& y) {
                           return linalg::lu_solve(x, pivots, y, left, adjoint);
                         }),
                         {lu, b}, kAtol);
      }
    }
    expect_gradgradcheck(one([](const Tensor& x) { return linalg::lu_factor(dominant(x)).LU; }),
                         {leaf({3, 3}, 43, dt)}, 1e-4);
  }
}

TEST(AutogradLinalg, Qr) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    for (const Shape& s : {Shape{2, 4, 4}, Shape{5, 3}, Shape{2, 3, 5}}) {
      SCOPED_TRACE(shape_to_string(s));
      expect_gradcheck([](const V& x) {
        linalg::QrResult r = linalg::qr(x[0]);
        return V{r.Q, r.R};
      }, {leaf(s, 50, dt)}, kAtol);
    }
    expect_gradcheck([](const V& x) {
      linalg::QrResult r = linalg::qr(x[0], "complete");  // m <= n: as reduced
      return V{r.Q, r.R};
    }, {leaf({3, 5}, 51, dt)}, kAtol);
    expect_gradgradcheck([](const V& x) {
      linalg::QrResult r = linalg::qr(x[0]);
      return V{r.Q, r.R};
    }, {leaf({4, 3}, 52, dt)}, 1e-4);
  }
  // PyTorch's errors, when the backward runs.
  const Tensor a = leaf({4, 3}, 53);
  expect_error([&] { autograd::backward({sum(linalg::qr(a, "r").R)}); }, ErrorKind::Runtime,
               "The derivative of linalg.qr depends on Q, which is not computed when mode='r'");
  expect_error([&] { autograd::backward({sum(linalg::qr(a, "complete").R)}); }, ErrorKind::Runtime,
               "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.");
}

// U Vh and S do not depend on the signs (phases) of the singular vectors.
V svd_invariants(const V& x, bool full_matrices = false) {
  linalg::SvdResult r = linalg::svd(x[0], full_matrices);
  const int64_t k = r.S.size(-1);
  return V{r.S, matmul(r.U.narrow(-1, 0, k), r.Vh.narrow(-2, 0, k))};
}

TEST(AutogradLinalg, SvdAndSvdvals) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    for (const Shape& s : {Shape{2, 4, 4}, Shape{5, 3}, Shape{2, 3, 5}}) {
      SCOPED_TRACE(shape_to_string(s));
      const Tensor a = leaf(s, 60, dt);
      expect_gradcheck([](const V& x) { return svd_invariants(x); }, {a}, kAtol);
      expect_gradcheck([](const V& x) { return svd_invariants(x, true); }, {a}, kAtol);
      expect_gradcheck(one([](const Tensor& x) { return linalg::svdvals(x); }), {a}, kAtol);
    }
    expect_gradgradcheck(one([](const Tensor& x) { return linalg::svdvals(x); }), {leaf({3, 4}, 61, dt)}, 1e-4);
  }
  // A loss that depends on the phase of complex singular vectors: PyTorch's error.
  const Tensor c = leaf({3, 3}, 62, DType::Complex128);
  const Tensor u = linalg::svd(c, false).U;
  expect_error([&] { autograd::backward({u}, {ones_like(u)}); }, ErrorKind::Runtime,
               "svd_backward: The singular vectors in the complex case are specified up to multiplication by "
               "e^{i phi}. The specified loss function depends on this phase term, making it ill-defined.");
}

// eigenvalues and |V|^2 do not depend on the signs (phases) of the eigenvectors.
V eigh_invariants(const V& x) {
  linalg::EighResult r = linalg::eigh(hermitian(x[0]));
  return V{r.eigenvalues, mul(r.eigenvectors, conj(r.eigenvectors))};
}

TEST(AutogradLinalg, EighAndEigvalsh) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = transposed_leaf({2, 4, 4}, 70, dt);
    expect_gradcheck([](const V& x) { return eigh_invariants(x); }, {a}, kAtol);
    expect_gradcheck(one([](const Tensor& x) { return linalg::eigvalsh(hermitian(x), "U"); }), {a}, kAtol);
    expect_gradgradcheck(one([](const Tensor& x) { return linalg::eigvalsh(hermitian(x)); }), {leaf({3, 3}, 71, dt)},
                         1e-4);
  }
  const Tensor c = hermitian(leaf({3, 3}, 72, DType::Complex128)).detach().requires_grad_();
  const Tensor v = linalg::eigh(c).eigenvectors;
  expect_error([&] { autograd::backward({v}, {ones_like(v)}); }, ErrorKind::Runtime,
               "linalg_eigh_backward: The eigenvectors in the complex case are specified up to multiplication by "
               "e^{i phi}. The specified loss function depends on this quantity, so it is ill-defined.");
}

TEST(AutogradLinalg, PinvAndLstsq) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    for (const Shape& s : {Shape{2, 4, 4}, Shape{5, 3}, Shape{2, 3, 5}}) {
      SCOPED_TRACE(shape_to_string(s));
      expect_gradcheck(one([](const Tensor& x) { return linalg::pinv(x); }), {leaf(s, 80, dt)}, kAtol);
    }
    expect_gradcheck(one([](const Tensor& x) { return linalg::pinv(hpd(x), std::optional<double>(), std::optional<double>(), true); }),
                     {leaf({3, 3}, 81, dt)}, kAtol);
    expect_gradgradcheck(one([](const Tensor& x) { return linalg::pinv(x); }), {leaf({4, 3}, 82, dt)}, 1e-4);
    // lstsq of a tall full-rank system: the solution, and the residuals (gelsd).
    const Tensor a = leaf({2, 5, 3}, 83, dt), b = leaf({2, 5, 2}, 84, dt);
    expect_gradcheck(two([](const Tensor& x, const Tensor& y) { return linalg::lstsq(x, y).solution; }), {a, b},
                     kAtol);
    expect_gradcheck([](const V& x) {
      linalg::LstsqResult r = linalg::lstsq(x[0], x[1], std::nullopt, "gelsd");
      return V{r.solution, r.residuals};
    }, {a, b}, kAtol);
  }
}

TEST(AutogradLinalg, FloatGradientsKeepTheirDtype) {
  // float32 formulas run in float32: the gradient has the input's dtype and agrees with
  // float64's to float32 precision.
  const Tensor a64 = leaf({3, 3}, 90);
  const Tensor a32 = a64.detach().to(DType::Float32).requires_grad_();
  autograd::backward({sum(linalg::inv(dominant(a64)))});
  autograd::backward({sum(linalg::inv(dominant(a32).to(DType::Float32)))});
  ASSERT_EQ(a32.grad().dtype(), DType::Float32);
  const Tensor diff = abs(sub(a32.grad().to(DType::Float64), a64.grad()));
  EXPECT_LT(amax(diff).item().to_double(), 1e-5);
}

}  // namespace
}  // namespace kiln
