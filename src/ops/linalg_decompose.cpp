// Front ends of the decompositions and what is built on them: cholesky(_ex), qr, svd,
// svdvals, eigh, eigvalsh, pinv, lstsq.
#include <algorithm>
#include <cmath>

#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "kiln/type_promotion.h"
#include "ops/autograd_hooks_linalg.h"
#include "ops/linalg_common.h"
#include "ops/op_utils.h"

namespace kiln::linalg {

using namespace detail;

CholeskyExResult cholesky_ex(const Tensor& A, bool upper, bool check_errors_flag) {
  KILN_LINALG_AUTOGRAD(cholesky_ex, A, upper, check_errors_flag);
  const char* op = "linalg.cholesky_ex";
  check_square(A, op);
  const Shape batch = batch_shape(A);
  const int64_t n = A.size(-1);
  check_lapack_extent(n, op);
  const int64_t count = batch_count(batch, op);
  Tensor buffer = column_major_copy(A, batch);
  Tensor info = zeros(batch, DType::Int32);
  if (count > 0 && n > 0) {
    kernels(A, op).cholesky(current_context(), {A.dtype(), count, n, buffer.data_ptr(), upper, info.data<int32_t>()});
  }
  if (check_errors_flag) check_errors(info, "linalg.cholesky_ex", A.dim() == 2);
  return {matrices(buffer), info};
}

Tensor cholesky(const Tensor& A, bool upper) {
  CholeskyExResult r = cholesky_ex(A, upper, false);
  check_errors(r.info, "linalg.cholesky", A.dim() == 2);
  return r.L;
}

QrResult qr(const Tensor& A, std::string_view mode) {
  KILN_LINALG_AUTOGRAD(qr, A, mode);
  const char* op = "linalg.qr";
  check_matrix_input(A, op);
  KILN_CHECK(mode == "reduced" || mode == "complete" || mode == "r", op,
             "qr received unrecognized mode '{}' but expected one of 'reduced' (default), 'r', or 'complete'", mode);
  const Shape batch = batch_shape(A);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  check_lapack_extent(m, op);
  check_lapack_extent(n, op);
  const bool complete = mode == "complete";
  const int64_t q_cols = complete ? m : k;
  const int64_t r_rows = complete ? m : k;
  Tensor buffer = column_major_copy(A, batch);
  QrResult r;
  r.R = new_column_major(batch, r_rows, n, A.dtype());
  r.Q = mode == "r" ? empty({0}, A.dtype()) : new_column_major(batch, m, q_cols, A.dtype());
  const int64_t count = batch_count(batch, op);
  if (count > 0 && m > 0 && (n > 0 || q_cols > 0)) {
    kernels(A, op).qr(current_context(), {A.dtype(), count, m, n, buffer.data_ptr(),
                                          mode == "r" ? nullptr : r.Q.data_ptr(), q_cols, r.R.data_ptr(), r_rows});
  } else if (r.R.numel() > 0) {
    r.R.zero_();  // m == 0 has no rows; n == 0 has none to fill
  }
  return r;
}

namespace {

// S (and U, Vh when `vectors`) of A; empty matrices have the identity as their
// singular vectors, as PyTorch gives them.
SvdResult svd_impl(const Tensor& A, bool full_matrices, bool vectors, const char* op) {
  check_matrix_input(A, op);
  const Shape batch = batch_shape(A);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  check_lapack_extent(m, op);
  check_lapack_extent(n, op);
  const int64_t u_cols = full_matrices ? m : k;
  const int64_t vh_rows = full_matrices ? n : k;
  SvdResult r;
  r.S = empty(with_vector(batch, k), to_real(A.dtype()));
  if (vectors) {
    r.U = new_column_major(batch, m, u_cols, A.dtype());
    r.Vh = new_column_major(batch, vh_rows, n, A.dtype());
  } else {
    r.U = empty({0}, A.dtype());
    r.Vh = empty({0}, A.dtype());
  }
  const int64_t count = batch_count(batch, op);
  if (count == 0) return r;
  if (k == 0) {
    if (vectors) {
      r.U.copy_(eye(m, u_cols, A.dtype()).expand(with_matrix(batch, m, u_cols)));
      r.Vh.copy_(eye(vh_rows, n, A.dtype()).expand(with_matrix(batch, vh_rows, n)));
    }
    return r;
  }
  // Column-major A, as PyTorch hands it to gesdd: the SVD of A^T (a plain copy) costs
  // the same and saves the transposed copy, but its singular vectors may differ from
  // PyTorch's by sign or phase, and users compare them.
  Tensor buffer = column_major_copy(A, batch);
  Tensor info = zeros(batch, DType::Int32);
  kernels(A, op).svd(current_context(), {A.dtype(), count, m, n, buffer.data_ptr(), r.S.data_ptr(),
                                         vectors ? r.U.data_ptr() : nullptr, vectors ? r.Vh.data_ptr() : nullptr,
                                         full_matrices, info.data<int32_t>()});
  check_errors(info, op, A.dim() == 2);
  return r;
}

EighResult eigh_impl(const Tensor& A, std::string_view UPLO, bool vectors, const char* op) {
  check_square(A, op);
  KILN_CHECK(UPLO == "L" || UPLO == "U" || UPLO == "l" || UPLO == "u", op,
             "Expected UPLO argument to be 'L' or 'U', but got {}", UPLO);
  const Shape batch = batch_shape(A);
  const int64_t n = A.size(-1);
  check_lapack_extent(n, op);
  EighResult r;
  r.eigenvalues = empty(with_vector(batch, n), to_real(A.dtype()));
  Tensor buffer = column_major_copy(A, batch);
  const int64_t count = batch_count(batch, op);
  if (count > 0 && n > 0) {
    Tensor info = zeros(batch, DType::Int32);
    kernels(A, op).eigh(current_context(), {A.dtype(), count, n, buffer.data_ptr(), r.eigenvalues.data_ptr(),
                                            UPLO == "U" || UPLO == "u", vectors, info.data<int32_t>()});
    check_errors(info, op, A.dim() == 2);
  }
  r.eigenvectors = vectors ? matrices(buffer) : empty({0}, A.dtype());
  return r;
}

}  // namespace

SvdResult svd(const Tensor& A, bool full_matrices) {
  KILN_LINALG_AUTOGRAD(svd, A, full_matrices);
  return svd_impl(A, full_matrices, true, "linalg.svd");
}

Tensor svdvals(const Tensor& A) {
  KILN_LINALG_AUTOGRAD(svdvals, A);
  return svd_impl(A, false, false, "linalg.svdvals").S;
}

EighResult eigh(const Tensor& A, std::string_view UPLO) {
  KILN_LINALG_AUTOGRAD(eigh, A, UPLO);
  return eigh_impl(A, UPLO, true, "linalg.eigh");
}

Tensor eigvalsh(const Tensor& A, std::string_view UPLO) {
  KILN_LINALG_AUTOGRAD(eigvalsh, A, UPLO);
  return eigh_impl(A, UPLO, false, "linalg.eigvalsh").eigenvalues;
}

namespace {

// atol/rtol per matrix (float64, batch-shaped), PyTorch's defaults: atol 0; rtol
// max(m, n) * eps, or 0 where atol > 0 was given and rtol was not.
std::pair<Tensor, Tensor> tolerances(const Tensor& A, const Shape& batch, const std::optional<Tensor>& atol,
                                     const std::optional<Tensor>& rtol, const char* op) {
  const double default_rtol = epsilon_of(A.dtype()) * static_cast<double>(std::max(A.size(-2), A.size(-1)));
  auto per_matrix = [&](const Tensor& t, const char* name) {
    KILN_CHECK(!is_complex(t.dtype()), op, "{} should not be complex, got {}", name, dtype_name(t.dtype()));
    KILN_CHECK(t.dim() <= static_cast<int64_t>(batch.size()) + 1 && (t.dim() == 0 || t.size(-1) == 1 ||
                                                                     t.dim() <= static_cast<int64_t>(batch.size())),
               op, "{} of shape {} does not broadcast against the batch shape {} (one value per matrix)", name,
               t.shape_str(), shape_to_string(batch));
    const Tensor flat = t.dim() == static_cast<int64_t>(batch.size()) + 1 && t.dim() > 0 ? t.squeeze(-1) : t;
    return flat.to(DType::Float64).expand(batch).contiguous();
  };
  Tensor a = atol ? per_matrix(*atol, "atol") : zeros(batch, DType::Float64);
  Tensor r;
  if (rtol) {
    r = per_matrix(*rtol, "rtol");
  } else {
    r = full(batch, Scalar(default_rtol), DType::Float64);
    if (atol) r = where(gt(a, Scalar(0.0)), Scalar(0.0), r).contiguous();
  }
  return {a, r};
}

}  // namespace

Tensor pinv(const Tensor& A, const std::optional<Tensor>& atol, const std::optional<Tensor>& rtol, bool hermitian) {
  KILN_LINALG_AUTOGRAD(pinv, A, atol, rtol, hermitian);
  const char* op = "linalg.pinv";
  check_matrix_input(A, op);
  if (hermitian) check_square(A, op);
  const Shape batch = batch_shape(A);
  const int64_t m = A.size(-2), n = A.size(-1);
  auto [a_tol, r_tol] = tolerances(A, batch, atol, rtol, op);
  const int64_t count = batch_count(batch, op);
  Tensor out = empty(with_matrix(batch, m, n), A.dtype());  // X (n x m) written column-major
  if (count == 0 || m == 0 || n == 0) return matrices(out.zero_());
  backend::PinvProblem p{A.dtype(), count, n, m, 0, nullptr, false, nullptr, nullptr,
                         a_tol.data<double>(), r_tol.data<double>(), out.data_ptr()};
  if (hermitian) {
    // A = V diag(w) Vᴴ: X = V diag(1/w) Vᴴ.
    EighResult e = eigh_impl(A, "L", true, "linalg.eigh");  // its errors read as eigh's, as in PyTorch
    const Tensor v = column_major_copy(e.eigenvectors, batch);
    const Tensor w = e.eigenvalues.contiguous();
    p.k = n;
    p.l = v.data_ptr();
    p.r = v.data_ptr();
    p.d = w.data_ptr();
    kernels(A, op).pinv(current_context(), p);
    return matrices(out);
  }
  // A = U diag(S) Vh: X = Vhᴴ diag(1/S) Uᴴ.
  SvdResult s = svd_impl(A, false, true, "linalg.svd");
  const Tensor u = column_major_copy(s.U, batch);
  const Tensor vh = column_major_copy(s.Vh, batch);
  const Tensor sv = s.S.contiguous();
  p.k = std::min(m, n);
  p.l = vh.data_ptr();
  p.l_from_vh = true;
  p.r = u.data_ptr();
  p.d = sv.data_ptr();
  kernels(A, op).pinv(current_context(), p);
  return matrices(out);
}

Tensor pinv(const Tensor& A, std::optional<double> atol, std::optional<double> rtol, bool hermitian) {
  std::optional<Tensor> a, r;
  if (atol) a = scalar_tensor(Scalar(*atol), DType::Float64);
  if (rtol) r = scalar_tensor(Scalar(*rtol), DType::Float64);
  return pinv(A, a, r, hermitian);
}

LstsqResult lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond,
                  std::optional<std::string_view> driver_name) {
  KILN_LINALG_AUTOGRAD(lstsq, A, B, rcond, driver_name);
  const char* op = "torch.linalg.lstsq";
  check_defined(A, op, "input");
  check_defined(B, op, "other");
  KILN_CHECK(A.dim() >= 2, op, "input must have at least 2 dimensions.");
  check_matrix_input(A, op, "input");
  KILN_CHECK(A.dtype() == B.dtype(), op,
             "Expected input and other to have the same dtype, but got input's dtype {} and other's dtype {}",
             torch_type_name(A.dtype()), torch_type_name(B.dtype()));
  const std::string_view name = driver_name.value_or("gelsy");
  backend::LstsqDriver driver;
  if (name == "gels") driver = backend::LstsqDriver::Gels;
  else if (name == "gelsy") driver = backend::LstsqDriver::Gelsy;
  else if (name == "gelsd") driver = backend::LstsqDriver::Gelsd;
  else if (name == "gelss") driver = backend::LstsqDriver::Gelss;
  else fail(ErrorKind::Runtime, op, "parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  KILN_CHECK(B.dim() == A.dim() || B.dim() == A.dim() - 1, op,
             "input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1");
  const bool vector = B.dim() == A.dim() - 1;
  const Tensor b = vector ? B.unsqueeze(-1) : B;
  KILN_CHECK(b.size(-2) == m, op, "input.size(-2) should match other.size({})", vector ? -1 : -2);
  check_lapack_extent(m, op);
  check_lapack_extent(n, op);
  const int64_t nrhs = b.size(-1);
  check_lapack_extent(nrhs, op);
  const Shape batch = broadcast_shapes(batch_shape(A), batch_shape(b), op);
  const int64_t count = batch_count(batch, op);
  const int64_t ldb = std::max<int64_t>({int64_t{1}, m, n});
  // Rows of B past m (when n > m) are the solution's room; LAPACK leaves them for us.
  Tensor b_buffer = zeros(with_matrix(batch, nrhs, ldb), A.dtype());
  matrices(b_buffer).narrow(-2, 0, m).copy_(b.expand(with_matrix(batch, m, nrhs)));
  Tensor a_buffer = column_major_copy(A, batch);
  const bool has_rank = driver != backend::LstsqDriver::Gels;
  const bool has_sv = driver == backend::LstsqDriver::Gelsd || driver == backend::LstsqDriver::Gelss;
  LstsqResult r;
  r.rank = has_rank ? zeros(batch, DType::Int64) : empty({0}, DType::Int64);
  r.singular_values = has_sv ? zeros(with_vector(batch, k), to_real(A.dtype())) : empty({0}, to_real(A.dtype()));
  Tensor info = zeros(batch, DType::Int32);
  const double rc = rcond.value_or(epsilon_of(A.dtype()) * static_cast<double>(std::max(m, n)));
  if (count > 0) {
    kernels(A, op).lstsq(current_context(),
                         {A.dtype(), count, m, n, nrhs, a_buffer.data_ptr(), b_buffer.data_ptr(), driver, rc,
                          has_rank ? r.rank.data<int64_t>() : nullptr,
                          has_sv ? r.singular_values.data_ptr() : nullptr, info.data<int32_t>()});
  }
  check_errors(info, op, A.dim() == 2);
  const Tensor solved = matrices(b_buffer);
  r.solution = solved.narrow(-2, 0, n);
  // The squared residual norms sit in rows n..m-1 (PyTorch: m > n, not gelsy, and for
  // gelsd/gelss only when every matrix has full rank).
  bool residuals = m > n && driver != backend::LstsqDriver::Gelsy;
  if (residuals && has_sv && count > 0) {
    residuals = sum(eq(r.rank, Scalar(n)).to(DType::Int64)).item().to_int64() == count;
  }
  if (residuals) {
    r.residuals = sum(square(abs(solved.narrow(-2, n, m - n))), {-2});
  } else {
    r.residuals = empty({0}, to_real(A.dtype()));
  }
  if (vector) r.solution = r.solution.squeeze(-1);
  return r;
}

}  // namespace kiln::linalg
