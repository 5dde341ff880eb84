// Front ends of the LU family and the solvers: solve_triangular, lu_factor(_ex), lu,
// lu_solve, solve(_ex), det, slogdet, inv(_ex).
#include <algorithm>

#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "kiln/type_promotion.h"
#include "ops/autograd_hooks_linalg.h"
#include "ops/linalg_common.h"
#include "ops/op_utils.h"

namespace kiln::linalg {

using namespace detail;

namespace {

// Up to this order det, inv and solve take the closed-form kernel.
constexpr int64_t kClosedFormOrder = 4;

// One batch stride for A expanded over `batch`, when its batch dims allow it: 0 when A
// has no batch of its own (one matrix for all), the stride of a batch that flattens.
// nullopt: A must be copied.
std::optional<int64_t> flat_batch_stride(const Tensor& expanded, int64_t batch_dims) {
  int64_t stride = 0;
  bool seen = false;
  for (int64_t d = batch_dims - 1; d >= 0; --d) {
    const int64_t size = expanded.size(d);
    if (size == 1) continue;
    const int64_t s = expanded.stride(d);
    if (!seen) {
      stride = s;
      seen = true;
      continue;
    }
    // Dims of one flat run: each stride is the next one's times its size.
    int64_t inner_size = 1;
    for (int64_t e = d + 1; e < batch_dims; ++e) inner_size *= expanded.size(e);
    if (s != stride * inner_size) return std::nullopt;
  }
  return stride;
}

// Is B a batch of vectors for A (torch's linalg_solve_is_vector_rhs)?
bool is_vector_rhs(const Tensor& A, const Tensor& B) {
  if (B.dim() == 1) return true;
  if (B.dim() != A.dim() - 1) return false;
  const Shape expected(A.sizes().begin(), A.sizes().end() - 1);
  return B.sizes() == expected;
}

}  // namespace

Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  KILN_LINALG_AUTOGRAD(solve_triangular, A, B, upper, left, unitriangular);
  const char* op = "linalg.solve_triangular";
  check_square(A, op);
  check_matrix_input(B, op, "B");
  check_same_dtype(A, B, op);
  const int64_t n = A.size(-1);
  const int64_t b_rows = B.size(-2), b_cols = B.size(-1);
  KILN_CHECK((left ? b_rows : b_cols) == n, op, "Incompatible shapes of A and B for the equation {} ({}x{} and {}x{})",
             left ? "AX = B" : "XA = B", n, n, b_rows, b_cols);
  const Shape batch = broadcast_shapes(batch_shape(A), batch_shape(B), op);
  const int64_t count = batch_count(batch, op);
  Tensor X = B.expand(with_matrix(batch, b_rows, b_cols)).clone();
  if (X.numel() == 0) return X;
  Tensor a = A.expand(with_matrix(batch, n, n));
  std::optional<int64_t> a_batch_stride = flat_batch_stride(a, static_cast<int64_t>(batch.size()));
  if (!a_batch_stride) {
    a = a.clone();
    a_batch_stride = n * n;
  }
  const int64_t nrhs = left ? b_cols : b_rows;
  kernels(A, op).triangular_solve(current_context(),
                                  {A.dtype(), count, n, nrhs, a.data_ptr(), *a_batch_stride, a.stride(-2), a.stride(-1),
                                   X.data_ptr(), b_rows * b_cols, b_cols, 1, upper, left, unitriangular});
  return X;
}

LuFactorExResult lu_factor_ex(const Tensor& A, bool pivot, bool check_errors_flag) {
  KILN_LINALG_AUTOGRAD(lu_factor_ex, A, pivot, check_errors_flag);
  const char* op = "linalg.lu_factor_ex";
  check_matrix_input(A, op);
  KILN_CHECK(pivot, op, "LU without pivoting is not implemented on the CPU");
  Factors f = lu_factor_buffers(A, batch_shape(A), op);
  if (check_errors_flag) check_errors(f.info, "torch.linalg.lu_factor_ex", A.dim() == 2);
  return {matrices(f.lu_buffer), f.pivots, f.info};
}

LuFactorResult lu_factor(const Tensor& A, bool pivot) {
  KILN_LINALG_AUTOGRAD(lu_factor, A, pivot);
  const char* op = "linalg.lu_factor";
  check_matrix_input(A, op);
  KILN_CHECK(pivot, op, "LU without pivoting is not implemented on the CPU");
  Factors f = lu_factor_buffers(A, batch_shape(A), op);
  check_errors(f.info, "torch.linalg.lu_factor", A.dim() == 2);
  return {matrices(f.lu_buffer), f.pivots};
}

LuResult lu(const Tensor& A, bool pivot) {
  KILN_LINALG_AUTOGRAD(lu, A, pivot);
  const char* op = "linalg.lu";
  check_matrix_input(A, op);
  KILN_CHECK(pivot, op, "LU without pivoting is not implemented on the CPU");
  const Shape batch = batch_shape(A);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  Factors f = lu_factor_buffers(A, batch, op);
  LuResult r{new_column_major(batch, m, m, A.dtype()), new_column_major(batch, m, k, A.dtype()),
             new_column_major(batch, k, n, A.dtype())};
  const int64_t count = batch_count(batch, op);
  if (count > 0) {
    kernels(A, op).lu_unpack(current_context(), {A.dtype(), count, m, n, f.lu_buffer.data_ptr(),
                                                 f.pivots.data<int32_t>(), r.P.data_ptr(), r.L.data_ptr(),
                                                 r.U.data_ptr()});
  }
  return r;
}

namespace {

// Solves with LU factors already in kernel layout (lu_buffer: batch x n x n column-major,
// pivots batch x n, both over `batch`). B: batch + [n, k] for left, [k, n] for right.
// With factors_of_transpose (real dtypes), the factors are Aᵀ's: op(Aᵀ)ᵀ = op(A) swaps
// getrs's 'N' and 'T'.
Tensor solve_with_factors(const Tensor& lu_buffer, const Tensor& pivots, const Tensor& B, const Shape& batch,
                          bool left, bool adjoint, const char* op, bool factors_of_transpose = false) {
  const int64_t n = lu_buffer.size(-1);
  const bool complex = is_complex(B.dtype());
  Tensor buffer;
  char trans;
  bool conjugate_rhs = false;
  if (left) {
    // op(A) X = B with B column-major.
    buffer = column_major_copy(B, batch);
    trans = adjoint ? (complex ? 'C' : 'T') : 'N';
  } else {
    // X op(A) = B is op(A)ᵀ Xᵀ = Bᵀ; Bᵀ column-major is B row-major. With op(A) = Aᴴ:
    // conj(A) Xᵀ = Bᵀ, i.e. A conj(Xᵀ) = conj(Bᵀ).
    buffer = B.expand(with_matrix(batch, B.size(-2), B.size(-1))).clone();
    trans = adjoint ? 'N' : 'T';
    conjugate_rhs = adjoint && complex;
  }
  if (factors_of_transpose) trans = trans == 'N' ? 'T' : 'N';
  const int64_t nrhs = left ? B.size(-1) : B.size(-2);
  check_lapack_extent(nrhs, op);
  const int64_t count = batch_count(batch, op);
  if (count > 0 && n > 0 && nrhs > 0) {
    kernels(B, op).lu_solve(current_context(), {B.dtype(), count, n, nrhs, lu_buffer.data_ptr(),
                                                pivots.data<int32_t>(), buffer.data_ptr(), trans, conjugate_rhs});
  }
  return left ? matrices(buffer) : buffer;
}

}  // namespace

Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  KILN_LINALG_AUTOGRAD(lu_solve, LU, pivots, B, left, adjoint);
  const char* op = "linalg.lu_solve";
  check_square(LU, op, "LU");
  check_matrix_input(B, op, "B");
  check_same_dtype(LU, B, op, "LU", "B");
  check_defined(pivots, op, "pivots");
  KILN_CHECK(pivots.dtype() == DType::Int32, op, "pivots should be a Tensor of scalar type Int. Got {}",
             torch_type_name(pivots.dtype()));
  const int64_t n = LU.size(-1);
  KILN_CHECK(pivots.dim() >= 1 && pivots.size(-1) == n, op,
             "Expected pivots to have shape (*, {}) to match LU, but got {}", n, pivots.shape_str());
  KILN_CHECK((left ? B.size(-2) : B.size(-1)) == n, op,
             "Incompatible shapes of A and B for the equation {} ({}x{} and {}x{})", left ? "AX = B" : "XA = B", n, n,
             B.size(-2), B.size(-1));
  const Shape lu_batch = batch_shape(LU);
  const Shape batch = broadcast_shapes(lu_batch, batch_shape(B), op);
  KILN_CHECK(Shape(pivots.sizes().begin(), pivots.sizes().end() - 1) == lu_batch, op,
             "Expected pivots to have the batch shape of LU {}, but got {}", LU.shape_str(), pivots.shape_str());
  const Tensor lu_buffer = column_major_copy(LU, batch);
  const Tensor piv = pivots.expand(with_vector(batch, n)).contiguous();
  // Pivots index rows: one out of range would make LAPACK read past the matrix.
  if (piv.numel() > 0) {
    const int64_t lo = amin(piv).item().to_int64(), hi = amax(piv).item().to_int64();
    KILN_CHECK(lo >= 1 && hi <= n, op, "pivots must be between 1 and {} (LAPACK's 1-based rows), got {}", n,
               lo < 1 ? lo : hi);
  }
  return solve_with_factors(lu_buffer, piv, B, batch, left, adjoint, op);
}

SolveExResult solve_ex(const Tensor& A, const Tensor& B, bool left, bool check_errors_flag) {
  KILN_LINALG_AUTOGRAD(solve_ex, A, B, left, check_errors_flag);
  const char* op = "linalg.solve";
  check_square(A, op);
  check_defined(B, op, "B");
  check_same_dtype(A, B, op);  // A's dtype is checked, so B's is too
  KILN_CHECK(B.dim() >= 1, op, "The input tensor B must have at least 1 dimension.");
  const bool vector = is_vector_rhs(A, B);
  KILN_CHECK(!(vector && !left), op,
             "Vector broadcasting of the left hand side is not supported for left=False. In this case linalg.solve is "
             "equivalent to B / A.squeeze(-1)");
  const Tensor b = vector ? B.unsqueeze(-1) : B;
  const int64_t n = A.size(-1);
  KILN_CHECK((left ? b.size(-2) : b.size(-1)) == n, op,
             "Incompatible shapes of A and B for the equation {} ({}x{} and {}x{})", left ? "AX = B" : "XA = B", n, n,
             b.size(-2), b.size(-1));
  const Shape batch = broadcast_shapes(batch_shape(A), batch_shape(b), op);
  const int64_t count = batch_count(batch, op);
  Tensor result;
  Tensor info;
  if (left && n >= 1 && n <= kClosedFormOrder) {
    const Tensor a = column_major_copy(A, batch);
    Tensor buffer = column_major_copy(b, batch);
    info = zeros(batch, DType::Int32);
    if (count > 0) {
      kernels(A, op).small_matrix(current_context(), {A.dtype(), count, n, b.size(-1), a.data_ptr(), nullptr, nullptr,
                                                      buffer.data_ptr(), info.data<int32_t>()});
    }
    result = matrices(buffer);
  } else {
    // As PyTorch: a contiguous real A is factored as Aᵀ (its row-major copy), so `info`
    // is that of LU(Aᵀ) and no transposing copy is made.
    const bool transposed = !is_complex(A.dtype()) && A.is_contiguous();
    Factors f = lu_factor_buffers(A, batch, op, transposed);
    result = solve_with_factors(f.lu_buffer, f.pivots, b, batch, left, false, op, transposed);
    info = f.info;
  }
  if (vector) result = result.squeeze(-1);
  if (check_errors_flag) check_errors(info, "linalg.solve_ex", A.dim() == 2);
  return {result, info};
}

Tensor solve(const Tensor& A, const Tensor& B, bool left) {
  SolveExResult r = solve_ex(A, B, left, false);
  check_errors(r.info, "linalg.solve", A.dim() == 2);
  return r.result;
}

Tensor det(const Tensor& A) {
  KILN_LINALG_AUTOGRAD(det, A);
  const char* op = "linalg.det";
  check_square(A, op);
  const Shape batch = batch_shape(A);
  const int64_t n = A.size(-1);
  if (n == 0) return ones(batch, A.dtype());
  const int64_t count = batch_count(batch, op);
  Tensor out = empty(batch, A.dtype());
  if (count == 0) return out;
  if (n <= kClosedFormOrder) {
    // det(Aᵀ) = det(A): a row-major A is read as the column-major Aᵀ, without a copy.
    const Tensor a = A.is_contiguous() ? A : column_major_copy(A, batch);
    kernels(A, op).small_matrix(current_context(),
                                {A.dtype(), count, n, 0, a.data_ptr(), out.data_ptr(), nullptr, nullptr, nullptr});
    return out;
  }
  Factors f = lu_factor_buffers(A, batch, op);
  kernels(A, op).lu_determinant(current_context(), {A.dtype(), count, n, f.lu_buffer.data_ptr(),
                                                    f.pivots.data<int32_t>(), out.data_ptr(), nullptr, nullptr});
  return out;
}

SlogdetResult slogdet(const Tensor& A) {
  KILN_LINALG_AUTOGRAD(slogdet, A);
  const char* op = "linalg.slogdet";
  check_square(A, op);
  const Shape batch = batch_shape(A);
  const int64_t n = A.size(-1);
  SlogdetResult r{empty(batch, A.dtype()), empty(batch, to_real(A.dtype()))};
  if (n == 0) {
    r.sign.fill_(Scalar(int64_t{1}));
    r.logabsdet.zero_();
    return r;
  }
  const int64_t count = batch_count(batch, op);
  if (count == 0) return r;
  Factors f = lu_factor_buffers(A, batch, op);
  kernels(A, op).lu_determinant(current_context(), {A.dtype(), count, n, f.lu_buffer.data_ptr(),
                                                    f.pivots.data<int32_t>(), nullptr, r.sign.data_ptr(),
                                                    r.logabsdet.data_ptr()});
  return r;
}

InvExResult inv_ex(const Tensor& A, bool check_errors_flag) {
  KILN_LINALG_AUTOGRAD(inv_ex, A, check_errors_flag);
  const char* op = "linalg.inv_ex";
  check_square(A, op);
  const Shape batch = batch_shape(A);
  const int64_t n = A.size(-1);
  check_lapack_extent(n, op);
  const int64_t count = batch_count(batch, op);
  InvExResult r;
  r.info = zeros(batch, DType::Int32);
  // A real row-major A is read as the column-major Aᵀ, whose inverse, column-major, is
  // A⁻¹ row-major: no transposing copy, and `info` comes from the LU of Aᵀ, as in
  // PyTorch (linalg.solve factors Aᵀ for contiguous real input).
  const bool transposed = !is_complex(A.dtype()) && A.is_contiguous();
  if (n >= 1 && n <= kClosedFormOrder) {
    const Tensor a = transposed ? A : column_major_copy(A, batch);
    Tensor out = empty(with_matrix(batch, n, n), A.dtype());
    if (count > 0) {
      kernels(A, op).small_matrix(current_context(), {A.dtype(), count, n, 0, a.data_ptr(), nullptr, out.data_ptr(),
                                                      nullptr, r.info.data<int32_t>()});
    }
    r.inverse = transposed ? out : matrices(out);
  } else {
    Tensor buffer = transposed ? A.clone() : column_major_copy(A, batch);
    if (count > 0 && n > 0) {
      kernels(A, op).inverse(current_context(), {A.dtype(), count, n, buffer.data_ptr(), r.info.data<int32_t>()});
    }
    r.inverse = transposed ? buffer : matrices(buffer);
  }
  if (check_errors_flag) check_errors(r.info, "linalg.inv_ex", A.dim() == 2);
  return r;
}

Tensor inv(const Tensor& A) {
  InvExResult r = inv_ex(A, false);
  check_errors(r.info, "linalg.inv", A.dim() == 2);
  return r.inverse;
}

}  // namespace kiln::linalg
