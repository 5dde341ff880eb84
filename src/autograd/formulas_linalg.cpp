// Backward formulas of the LU family and the solvers (PyTorch's FunctionsManual.cpp
// formulas, same names): solve_triangular, lu_factor(_ex), lu, lu_solve, solve(_ex),
// det, slogdet, inv(_ex). Complex gradients are conjugate Wirtinger derivatives, as in
// PyTorch. Each backward is written with recorded ops (solves included), so it can be
// differentiated again.
#include <algorithm>
#include <limits>

#include "autograd/formula_util.h"
#include "autograd/function.h"
#include "autograd/linalg_util.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "ops/autograd_hooks_linalg.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;
using C = BackwardContext;
using namespace la;

Tensor maybe(bool needed, const Tensor& t) { return needed ? t : Tensor(); }

// ---------------------------------------------------------------- triangular solve

Tensor solve_triangular_entry(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  Tensor X = below_autograd([&] { return linalg::solve_triangular(A, B, upper, left, unitriangular); });
  return record("LinalgSolveTriangularBackward0", {A, B}, X, {Save::input(A), Save::out(0)},
                [upper, left, unitriangular](C& c) {
                  const Tensor &A = c.saved[0], &X = c.saved[1];
                  // G_B = A^-H G_X; G_A = -G_B X^H (left) or -X^H G_B, on A's triangle.
                  const Tensor gB = linalg::solve_triangular(mH(A), c.grad(), !upper, left, unitriangular);
                  Tensor gA;
                  if (c.needs[0]) {
                    gA = neg(left ? matmul(gB, mH(X)) : matmul(mH(X), gB));
                    gA = upper ? triu(gA, unitriangular ? 1 : 0) : tril(gA, unitriangular ? -1 : 0);
                  }
                  return Grads{gA, maybe(c.needs[1], gB)};
                });
}

// ---------------------------------------------------------------- LU

// The gradient of lu_factor's packed LU: L's part below the diagonal, U's on and above.
Tensor lu_factor_backward(const Tensor& g, const Tensor& LU, const Tensor& pivots) {
  const int64_t k = std::min(LU.size(-2), LU.size(-1));
  const LuFactors f = lu_unpack(LU, pivots);
  return lu_backward(tril(g.narrow(-1, 0, k), -1), triu(g.narrow(-2, 0, k)), f.P, f.L, f.U);
}

template <typename Result>
Result lu_factor_recorded(const char* name, Result r, const Tensor& A) {
  record(name, {A}, {&r.LU}, {Save::out(0), Save::input(r.pivots)},
         [](C& c) { return Grads{lu_factor_backward(c.grad(), c.saved[0], c.saved[1])}; });
  return r;
}

linalg::LuFactorResult lu_factor_entry(const Tensor& A, bool pivot) {
  return lu_factor_recorded("LinalgLuFactorExBackward0", below_autograd([&] { return linalg::lu_factor(A, pivot); }),
                            A);
}
linalg::LuFactorExResult lu_factor_ex_entry(const Tensor& A, bool pivot, bool check_errors) {
  return lu_factor_recorded("LinalgLuFactorExBackward0",
                            below_autograd([&] { return linalg::lu_factor_ex(A, pivot, check_errors); }), A);
}

// P is a constant (PyTorch: not differentiable); L and U are recorded.
linalg::LuResult lu_entry(const Tensor& A, bool pivot) {
  linalg::LuResult r = below_autograd([&] { return linalg::lu(A, pivot); });
  record("LinalgLuBackward0", {A}, {&r.L, &r.U}, {Save::input(r.P), Save::out(0), Save::out(1)},
         [](C& c) { return Grads{lu_backward(c.grads[0], c.grads[1], c.saved[0], c.saved[1], c.saved[2])}; });
  return r;
}

// The gradient of lu_solve's X with respect to LU (PyTorch's linalg_lu_solve_LU).
Tensor lu_solve_LU_grad(const Tensor& gX, const Tensor& LU, const Tensor& pivots, const Tensor& X, bool left,
                        bool adjoint) {
  const LuFactors f = lu_unpack(LU, pivots);
  if (left != adjoint) {
    // gR = U^-H op2(-gX) op2(X)^H; gU = triu(gR); gL = tril(L^-H gR U^H, -1)
    const Tensor gR = linalg::solve_triangular(
        mH(f.U), neg(left ? matmul(gX, mH(X)) : matmul(mH(gX), X)), /*upper=*/false);
    const Tensor gL = tril(linalg::solve_triangular(mH(f.L), matmul(gR, mH(f.U)), /*upper=*/true, /*left=*/true,
                                                    /*unitriangular=*/true),
                           -1);
    return add(gL, triu(gR));
  }
  // gR = -P^T op3(X) op1(op2(gX)) P L^-H; gL = tril(gR, -1); gU = triu(L^H gR U^-H)
  Tensor gR = neg(matmul(matmul(matmul(mT(f.P), left ? X : mH(X)), left ? mH(gX) : gX), f.P));
  gR = linalg::solve_triangular(mH(f.L), gR, /*upper=*/true, /*left=*/false, /*unitriangular=*/true);
  const Tensor gU = triu(linalg::solve_triangular(mH(f.U), matmul(mH(f.L), gR), /*upper=*/false, /*left=*/false));
  return add(tril(gR, -1), gU);
}

Tensor lu_solve_entry(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  Tensor X = below_autograd([&] { return linalg::lu_solve(LU, pivots, B, left, adjoint); });
  return record("LinalgLuSolveBackward0", {LU, B}, X, {Save::input(LU), Save::input(pivots), Save::out(0)},
                [left, adjoint](C& c) {
                  const Tensor &LU = c.saved[0], &pivots = c.saved[1], &X = c.saved[2];
                  Tensor gLU = c.needs[0] ? lu_solve_LU_grad(c.grad(), LU, pivots, X, left, adjoint) : Tensor();
                  Tensor gB = c.needs[1] ? linalg::lu_solve(LU, pivots, c.grad(), left, !adjoint) : Tensor();
                  return Grads{gLU, gB};
                });
}

// ---------------------------------------------------------------- solve

// torch's linalg_solve_is_vector_rhs.
bool is_vector_rhs(const Tensor& A, const Tensor& B) {
  if (B.dim() == 1) return true;
  if (B.dim() != A.dim() - 1) return false;
  return Shape(A.sizes().begin(), A.sizes().end() - 1) == B.sizes();
}

linalg::SolveExResult solve_ex_entry(const Tensor& A, const Tensor& B, bool left, bool check_errors) {
  linalg::SolveExResult r = below_autograd([&] { return linalg::solve_ex(A, B, left, check_errors); });
  const bool vector = is_vector_rhs(A, B);
  record("LinalgSolveExBackward0", {A, B}, {&r.result}, {Save::input(A), Save::out(0)}, [left, vector](C& c) {
    const Tensor& A = c.saved[0];
    const Tensor X = vector ? c.saved[1].unsqueeze(-1) : c.saved[1];
    const Tensor gX = vector ? c.grad().unsqueeze(-1) : c.grad();
    // gB = A^-H gX; gA = -gB X^H (left) or -X^H gB.
    const Tensor gB = linalg::solve(mH(A), gX, left);
    Tensor gA = c.needs[0] ? neg(left ? matmul(gB, mH(X)) : matmul(mH(X), gB)) : Tensor();
    return Grads{gA, maybe(c.needs[1], vector ? gB.squeeze(-1) : gB)};
  });
  return r;
}

// ---------------------------------------------------------------- det, slogdet, inv

double epsilon_of(DType t) {
  return to_real(t) == DType::Float32 ? std::numeric_limits<float>::epsilon()
                                      : std::numeric_limits<double>::epsilon();
}

// d * I for a batch of scalars d and matrices of order n.
Tensor scaled_identity(const Tensor& d, int64_t n) {
  Shape sizes = d.sizes();
  sizes.push_back(n);
  return diag_embed(d.unsqueeze(-1).expand(sizes));
}

// prod_{j != i} S_j for every i (the gradient of prod(S)), safe for zeros.
Tensor products_of_others(const Tensor& S) {
  const int64_t k = S.size(-1);
  Shape sizes = S.sizes();
  sizes.push_back(k);
  const Tensor on_diagonal = eq(eye(k, k, DType::Float64), Scalar(1.0));
  return prod(where(on_diagonal, Scalar(1.0), S.unsqueeze(-2).expand(sizes)), {-1});
}

Tensor det_backward(const Tensor& g, const Tensor& A, const Tensor& det) {
  const int64_t n = A.size(-1);
  if (A.numel() == 0) return zeros_of(A);
  bool singular;
  {
    NoGradGuard no_grad;
    singular = sum(lt(abs(det), Scalar(100.0 * epsilon_of(A.dtype()))).to(DType::Int64)).item().to_int64() > 0;
  }
  if (!singular) {
    // A^H G = conj(det) g I
    return linalg::solve(mH(A), scaled_identity(mul(g, conj(det)), n));
  }
  // The adjugate through the SVD, valid for singular A too (as PyTorch).
  const linalg::SvdResult s = linalg::svd(A, false);
  const Tensor alpha = mul(conj(mul(linalg::det(s.U), linalg::det(s.Vh))), g);
  const Tensor D = mul(alpha.unsqueeze(-1), products_of_others(s.S));
  return matmul(mul(s.U, D.unsqueeze(-2)), s.Vh);
}

Tensor det_entry(const Tensor& A) {
  Tensor y = below_autograd([&] { return linalg::det(A); });
  return record("LinalgDetBackward0", {A}, y, {Save::input(A), Save::out(0)},
                [](C& c) { return Grads{det_backward(c.grad(), c.saved[0], c.saved[1])}; });
}

linalg::SlogdetResult slogdet_entry(const Tensor& A) {
  linalg::SlogdetResult r = below_autograd([&] { return linalg::slogdet(A); });
  record("LinalgSlogdetBackward0", {A}, {&r.sign, &r.logabsdet}, {Save::input(A), Save::out(0)}, [](C& c) {
    const Tensor &A = c.saved[0], &sign = c.saved[1];
    const Tensor &g_sign = c.grads[0], &g_logabsdet = c.grads[1];
    // (d slogdet)*(g_sign, g_abs) = (g_abs - i Im(conj(g_sign) sign)) A^-H; the sign of a
    // real determinant is locally constant.
    Tensor g = g_logabsdet;
    if (is_complex(A.dtype())) {
      const Tensor w = mul(conj(g_sign), sign);
      g = sub(g_logabsdet.to(A.dtype()), mul(sub(w, conj(w)), Scalar(0.5)));
    }
    return Grads{linalg::solve(mH(A), scaled_identity(g, A.size(-1)))};
  });
  return r;
}

linalg::InvExResult inv_ex_entry(const Tensor& A, bool check_errors) {
  linalg::InvExResult r = below_autograd([&] { return linalg::inv_ex(A, check_errors); });
  record("LinalgInvExBackward0", {A}, {&r.inverse}, {Save::out(0)}, [](C& c) {
    const Tensor inv_h = mH(c.saved[0]);
    return Grads{neg(matmul(inv_h, matmul(c.grad(), inv_h)))};
  });
  return r;
}

const bool installed = [] {
  auto& h = autograd_hooks::linalg_hooks();
  h.solve_triangular = solve_triangular_entry;
  h.lu_factor = lu_factor_entry;
  h.lu_factor_ex = lu_factor_ex_entry;
  h.lu = lu_entry;
  h.lu_solve = lu_solve_entry;
  h.solve_ex = solve_ex_entry;
  h.det = det_entry;
  h.slogdet = slogdet_entry;
  h.inv_ex = inv_ex_entry;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
