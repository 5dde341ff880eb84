// kiln::linalg: torch.linalg's names, argument order, outputs and errors, for float32,
// float64, complex64 and complex128 with any leading batch dims (docs/ops.md, "Linear
// algebra"). Results that PyTorch returns column-major (LU, Q, U, ...) are
// column-major views here too; their values are what matters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln::linalg {

// torch.linalg.LinAlgError: a numerical failure (singular matrix, not positive-definite,
// no convergence). A RuntimeError in Python, as PyTorch's is. batch_index is the first
// failing matrix of a batch (-1 for a single matrix); info is LAPACK's code for it.
class LinAlgError : public Error {
 public:
  LinAlgError(const std::string& message, int64_t batch_index, int32_t info)
      : Error(ErrorKind::Runtime, message), batch_index_(batch_index), info_(info) {}
  int64_t batch_index() const { return batch_index_; }
  int32_t info() const { return info_; }

 private:
  int64_t batch_index_;
  int32_t info_;
};

struct LuFactorResult {
  Tensor LU, pivots;
};
struct LuFactorExResult {
  Tensor LU, pivots, info;
};
struct LuResult {
  Tensor P, L, U;
};
struct SolveExResult {
  Tensor result, info;
};
struct SlogdetResult {
  Tensor sign, logabsdet;
};
struct InvExResult {
  Tensor inverse, info;
};
struct CholeskyExResult {
  Tensor L, info;
};
struct QrResult {
  Tensor Q, R;
};
struct SvdResult {
  Tensor U, S, Vh;
};
struct EighResult {
  Tensor eigenvalues, eigenvectors;
};
struct LstsqResult {
  Tensor solution, residuals, rank, singular_values;
};

// Triangular systems: A X = B (left) or X A = B; only A's `upper` triangle is read,
// and not its diagonal when unitriangular. A zero diagonal gives inf/NaN, not an error.
Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left = true, bool unitriangular = false);

// LU with partial pivoting: pivots are 1-based int32 (LAPACK's getrf). pivot=false is
// CUDA-only in PyTorch and refused here as there.
LuFactorResult lu_factor(const Tensor& A, bool pivot = true);
LuFactorExResult lu_factor_ex(const Tensor& A, bool pivot = true, bool check_errors = false);
LuResult lu(const Tensor& A, bool pivot = true);
Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left = true, bool adjoint = false);

Tensor solve(const Tensor& A, const Tensor& B, bool left = true);
SolveExResult solve_ex(const Tensor& A, const Tensor& B, bool left = true, bool check_errors = false);
Tensor det(const Tensor& A);
SlogdetResult slogdet(const Tensor& A);
Tensor inv(const Tensor& A);
InvExResult inv_ex(const Tensor& A, bool check_errors = false);

Tensor cholesky(const Tensor& A, bool upper = false);
CholeskyExResult cholesky_ex(const Tensor& A, bool upper = false, bool check_errors = false);
// mode: "reduced", "complete" or "r" (Q is then an empty tensor).
QrResult qr(const Tensor& A, std::string_view mode = "reduced");
SvdResult svd(const Tensor& A, bool full_matrices = true);
Tensor svdvals(const Tensor& A);
// UPLO: "L" or "U", the triangle read.
EighResult eigh(const Tensor& A, std::string_view UPLO = "L");
Tensor eigvalsh(const Tensor& A, std::string_view UPLO = "L");

// Singular values (|eigenvalues| when hermitian) at or below max(atol, rtol * largest)
// are dropped. rtol defaults to max(m, n) * eps(dtype), or 0 when only atol (> 0) is
// given. The Tensor overloads broadcast atol/rtol against A's batch shape.
Tensor pinv(const Tensor& A, std::optional<double> atol = std::nullopt, std::optional<double> rtol = std::nullopt,
            bool hermitian = false);
Tensor pinv(const Tensor& A, const std::optional<Tensor>& atol, const std::optional<Tensor>& rtol,
            bool hermitian = false);

// driver: "gelsy" (default), "gels", "gelsd", "gelss". rcond defaults to
// eps(dtype) * max(m, n).
LstsqResult lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond = std::nullopt,
                  std::optional<std::string_view> driver = std::nullopt);

}  // namespace kiln::linalg
