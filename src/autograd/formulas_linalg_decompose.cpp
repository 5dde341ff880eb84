// Backward formulas of the decompositions and what is built on them (PyTorch's
// FunctionsManual.cpp, same names): cholesky(_ex), qr, svd/svdvals, eigh/eigvalsh, pinv,
// lstsq; and the FP8 matmuls, which PyTorch does not differentiate. Complex gradients are
// conjugate Wirtinger derivatives; where the loss depends on the arbitrary phase of
// complex singular vectors or eigenvectors, backward raises PyTorch's error.
#include <algorithm>

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

// ---------------------------------------------------------------- cholesky

linalg::CholeskyExResult cholesky_ex_entry(const Tensor& A, bool upper, bool check_errors) {
  linalg::CholeskyExResult r = below_autograd([&] { return linalg::cholesky_ex(A, upper, check_errors); });
  record("LinalgCholeskyExBackward0", {A}, {&r.L}, {Save::out(0)}, [upper](C& c) {
    // gA = L^-H Phi(L^H gL) L^-1, Phi(X) = tril(X) with halved diagonal, made Hermitian.
    const Tensor L = upper ? mH(c.saved[0]) : c.saved[0];
    const Tensor gL = upper ? mH(c.grad()) : c.grad();
    Tensor gA = tril(matmul(mH(L), gL));
    gA = mul(add(gA, mH(tril(gA, -1))), Scalar(0.5));
    gA = linalg::solve_triangular(mH(L), gA, /*upper=*/true, /*left=*/true);
    return Grads{linalg::solve_triangular(L, gA, /*upper=*/false, /*left=*/false)};
  });
  return r;
}

// ---------------------------------------------------------------- qr

Tensor qr_backward(const Tensor& gQ, const Tensor& gR, const Tensor& Q, const Tensor& R) {
  const int64_t m = Q.size(-2), n = R.size(-1);
  Tensor gA = sub(matmul(gR, mH(R)), matmul(mH(Q), gQ));
  if (m >= n) {
    // gA = (gQ + Q syminvadj(triu(gR R^H - Q^H gQ))) R^-H, syminvadj(X) = X + X^H with
    // the real part of its diagonal halved.
    Tensor t = triu(gA);
    t = add(t, mH(t));
    t = sub(t, diag_embed(mul(real_of(diagonal(t)), Scalar(0.5))));
    gA = add(matmul(Q, t), gQ);
    return linalg::solve_triangular(mH(R), gA, /*upper=*/false, /*left=*/false);
  }
  // Wide: gA = Q gR + [Q trilImInvAdjSkew(-(gR R^H - Q^H gQ)) R1^-H, 0].
  Tensor t = neg(gA);
  t = tril(sub(t, mH(t)));
  if (is_complex(t.dtype())) t = sub(t, diag_embed(mul(sub(diagonal(t), conj(diagonal(t))), Scalar(0.25))));
  gA = matmul(Q, t);
  gA = linalg::solve_triangular(mH(R.narrow(-1, 0, m)), gA, /*upper=*/false, /*left=*/false);
  Shape pad = gA.sizes();
  pad.back() = n - m;
  gA = cat({gA, zeros(pad, gA.dtype())}, -1);
  return add(gA, matmul(Q, gR));
}

linalg::QrResult qr_entry(const Tensor& A, std::string_view mode) {
  linalg::QrResult r = below_autograd([&] { return linalg::qr(A, mode); });
  const bool has_q = mode != "r";
  const bool differentiable = has_q && (mode == "reduced" || A.size(-2) <= A.size(-1));
  std::vector<Tensor*> outputs{&r.R};
  if (has_q) outputs.push_back(&r.Q);
  record("LinalgQrBackward0", {A}, outputs, {Save::out(0), Save::out(has_q ? 1 : 0)}, [has_q, differentiable](C& c) {
    // PyTorch's errors, raised when the backward runs.
    KILN_CHECK(has_q, "linalg.qr",
               "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
               "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
    KILN_CHECK(differentiable, "linalg.qr",
               "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.");
    return Grads{qr_backward(c.grads[1], c.grads[0], c.saved[1], c.saved[0])};
  });
  return r;
}

// ---------------------------------------------------------------- svd

Tensor svd_backward(const Tensor& gU, const Tensor& gS, const Tensor& gVh, const Tensor& U, const Tensor& S,
                    const Tensor& Vh) {
  const int64_t m = U.size(-2), n = Vh.size(-1);
  const bool complex = is_complex(U.dtype());
  const auto skew = [](const Tensor& X) { return sub(X, mH(X)); };
  const Tensor UhgU = skew(matmul(mH(U), gU));
  const Tensor VhgV = skew(matmul(Vh, mH(gVh)));
  if (complex) {
    // The loss must not depend on the phases of the singular vectors:
    // Im(diag(U^H gU)) + Im(diag(V^H gV)) = 0.
    KILN_CHECK(all_close(imag_values(diagonal(UhgU)), neg(imag_values(diagonal(VhgV))), 1e-2, 1e-2), "linalg.svd",
               "svd_backward: The singular vectors in the complex case are specified up to multiplication by "
               "e^{{i phi}}. The specified loss function depends on this phase term, making it ill-defined.");
  }
  // E_jk = S_k^2 - S_j^2 off the diagonal, 1 on it (its entries there are only divided into zeros).
  const Tensor S2 = mul(S, S);
  const Tensor E = add(sub(S2.unsqueeze(-2), S2.unsqueeze(-1)), eye(S.size(-1), S.size(-1), S.dtype()));
  Tensor gA = div(add(mul(UhgU, S.unsqueeze(-2)), mul(S.unsqueeze(-1), VhgV)), E);
  gA = add(gA, diag_embed(gS));
  if (complex) gA = add(gA, diag_embed(div(diagonal(UhgU), mul(S, Scalar(2.0)))));
  if (m > n) {
    // gA = [U gA + (I - U U^H) gU S^-1] V^H
    gA = matmul(U, gA);
    const Tensor gUSinv = div(gU, S.unsqueeze(-2));
    gA = sub(add(gA, gUSinv), matmul(U, matmul(mH(U), gUSinv)));
    return matmul(gA, Vh);
  }
  if (m < n) {
    // gA = U [gA V^H + S^-1 gV^H (I - V V^H)]
    gA = matmul(gA, Vh);
    const Tensor SinvgVh = div(gVh, S.unsqueeze(-1));
    gA = sub(add(gA, SinvgVh), matmul(matmul(SinvgVh, mH(Vh)), Vh));
    return matmul(U, gA);
  }
  return matmul(U, matmul(gA, Vh));
}

linalg::SvdResult svd_entry(const Tensor& A, bool full_matrices) {
  linalg::SvdResult r = below_autograd([&] { return linalg::svd(A, full_matrices); });
  const int64_t k = std::min(A.size(-2), A.size(-1));
  record("LinalgSvdBackward0", {A}, {&r.U, &r.S, &r.Vh}, {Save::out(0), Save::out(1), Save::out(2)},
         [full_matrices, k](C& c) {
           // With full_matrices only the first k singular vectors take part (as PyTorch).
           const auto first_columns = [&](const Tensor& t) { return full_matrices ? t.narrow(-1, 0, k) : t; };
           const auto first_rows = [&](const Tensor& t) { return full_matrices ? t.narrow(-2, 0, k) : t; };
           return Grads{svd_backward(first_columns(c.grads[0]), c.grads[1], first_rows(c.grads[2]),
                                     first_columns(c.saved[0]), c.saved[1], first_rows(c.saved[2]))};
         });
  return r;
}

// svdvals is the S of a recorded (reduced) svd, as PyTorch composes it, so its second
// derivative goes through svd's formula.
Tensor svdvals_entry(const Tensor& A) { return svd_entry(A, false).S; }

// ---------------------------------------------------------------- eigh

Tensor eigh_backward(const Tensor& gL, const Tensor& gV, const Tensor& L, const Tensor& V) {
  Tensor VhgV = matmul(mH(V), gV);
  if (is_complex(V.dtype())) {
    KILN_CHECK(all_close(imag_values(diagonal(VhgV)), zeros(L.sizes(), L.dtype()), 1e-2, 1e-2), "linalg.eigh",
               "linalg_eigh_backward: The eigenvectors in the complex case are specified up to multiplication by "
               "e^{{i phi}}. The specified loss function depends on this quantity, so it is ill-defined.");
  }
  // Projected onto the skew-Hermitian matrices, divided by E_ij = L_j - L_i off the
  // diagonal, gL on it; then conjugated by V.
  VhgV = mul(sub(VhgV, mH(VhgV)), Scalar(0.5));
  const Tensor E = add(sub(L.unsqueeze(-2), L.unsqueeze(-1)), eye(L.size(-1), L.size(-1), L.dtype()));
  const Tensor inner = add(off_diagonal(div(VhgV, E)), diag_embed(gL));
  return matmul(V, matmul(inner, mH(V)));
}

linalg::EighResult eigh_entry(const Tensor& A, std::string_view UPLO) {
  linalg::EighResult r = below_autograd([&] { return linalg::eigh(A, UPLO); });
  record("LinalgEighBackward0", {A}, {&r.eigenvalues, &r.eigenvectors}, {Save::out(0), Save::out(1)},
         [](C& c) { return Grads{eigh_backward(c.grads[0], c.grads[1], c.saved[0], c.saved[1])}; });
  return r;
}

// eigvalsh is the eigenvalues of a recorded eigh (PyTorch computes the vectors too when
// the input requires grad).
Tensor eigvalsh_entry(const Tensor& A, std::string_view UPLO) { return eigh_entry(A, UPLO).eigenvalues; }

// ---------------------------------------------------------------- pinv, lstsq

Tensor pinv_entry(const Tensor& A, const std::optional<Tensor>& atol, const std::optional<Tensor>& rtol,
                  bool hermitian) {
  Tensor X = below_autograd([&] { return linalg::pinv(A, atol, rtol, hermitian); });
  return record("LinalgPinvBackward0", {A}, X, {Save::input(A), Save::out(0)},
                [](C& c) { return Grads{pinv_backward(c.grad(), c.saved[1], c.saved[0])}; });
}

linalg::LstsqResult lstsq_entry(const Tensor& A, const Tensor& B, std::optional<double> rcond,
                                std::optional<std::string_view> driver) {
  linalg::LstsqResult r = below_autograd([&] { return linalg::lstsq(A, B, rcond, driver); });
  const bool vector = B.dim() == A.dim() - 1;
  record("LinalgLstsqBackward0", {A, B}, {&r.solution, &r.residuals},
         {Save::input(A), Save::input(B), Save::out(0)}, [vector](C& c) {
           const Tensor &A = c.saved[0];
           const Tensor B = vector ? c.saved[1].unsqueeze(-1) : c.saved[1];
           const Tensor X = vector ? c.saved[2].unsqueeze(-1) : c.saved[2];
           const Tensor gX = vector ? c.grads[0].unsqueeze(-1) : c.grads[0];
           // From the solution: X = pinv(A) B.
           const Tensor pinvA = linalg::pinv(A);
           Tensor gA = c.needs[0] ? pinv_backward(matmul(gX, mH(B)), pinvA, A) : Tensor();
           Tensor gB = c.needs[1] ? matmul(mH(pinvA), gX) : Tensor();
           // From the residuals |A X - B|^2 (Danskin: X held fixed).
           const Tensor& g_res = c.grads[1];
           if (g_res.numel() > 0) {
             const Tensor res = sub(matmul(A, X), B);
             const Tensor gL = g_res.unsqueeze(-2);
             if (c.needs[0]) gA = add(gA, mul(matmul(mul(gL, res), mH(X)), Scalar(2.0)));
             if (c.needs[1]) gB = sub(gB, mul(mul(gL, res), Scalar(2.0)));
           }
           if (gB.defined() && vector) gB = gB.squeeze(-1);
           return Grads{gA, gB};
         });
  return r;
}

// ---------------------------------------------------------------- not differentiable

Tensor not_differentiable_entry(const char* aten_name, const std::vector<Tensor>& inputs, Tensor out) {
  const std::string name = aten_name;
  return record("NotImplemented", inputs, out, {}, [name](C&) -> Grads {
    fail(ErrorKind::NotImplemented, "backward", "derivative for aten::{} is not implemented", name);
  });
}

const bool installed = [] {
  auto& h = autograd_hooks::linalg_hooks();
  h.cholesky_ex = cholesky_ex_entry;
  h.qr = qr_entry;
  h.svd = svd_entry;
  h.svdvals = svdvals_entry;
  h.eigh = eigh_entry;
  h.eigvalsh = eigvalsh_entry;
  h.pinv = pinv_entry;
  h.lstsq = lstsq_entry;
  h.not_differentiable = not_differentiable_entry;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
