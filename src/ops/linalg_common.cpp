// Shared pieces of the linalg front ends (linalg_common.h).
#include "ops/linalg_common.h"

#include <climits>
#include <limits>

#include "kiln/context.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "ops/op_utils.h"

namespace kiln::linalg::detail {

void check_matrix_input(const Tensor& A, const char* op, const char* name) {
  check_defined(A, op, name);
  const DType t = A.dtype();
  KILN_CHECK(t != DType::Float16 && t != DType::BFloat16, op, "Low precision dtypes not supported. Got {}",
             torch_type_name(t));
  KILN_CHECK(t == DType::Float32 || t == DType::Float64 || t == DType::Complex64 || t == DType::Complex128, op,
             "Expected a floating point or complex tensor as input. Got {}", torch_type_name(t));
  KILN_CHECK(A.dim() >= 2, op, "The input tensor {} must have at least 2 dimensions.", name);
}

void check_square(const Tensor& A, const char* op, const char* name) {
  check_matrix_input(A, op, name);
  KILN_CHECK(A.size(-1) == A.size(-2), op, "{} must be batches of square matrices, but they are {} by {} matrices",
             name, A.size(-2), A.size(-1));
}

void check_same_dtype(const Tensor& A, const Tensor& B, const char* op, const char* a_name, const char* b_name) {
  KILN_CHECK(A.dtype() == B.dtype(), op, "Expected {} and {} to have the same dtype, but found {} of type {} and {} of type {} instead",
             a_name, b_name, a_name, torch_type_name(A.dtype()), b_name, torch_type_name(B.dtype()));
}

Shape batch_shape(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

int64_t batch_count(const Shape& batch, const char* op) { return shape_numel(batch, op); }

void check_lapack_extent(int64_t extent, const char* op) {
  KILN_CHECK(extent <= INT_MAX, op, "a matrix extent of {} is past what LAPACK's 32-bit indices take (at most {})",
             extent, INT_MAX);
}

Shape with_matrix(const Shape& batch, int64_t rows, int64_t cols) {
  Shape s = batch;
  s.push_back(rows);
  s.push_back(cols);
  return s;
}

Shape with_vector(const Shape& batch, int64_t length) {
  Shape s = batch;
  s.push_back(length);
  return s;
}

Tensor column_major_copy(const Tensor& t, const Shape& batch) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  return t.expand(with_matrix(batch, rows, cols)).transpose(-2, -1).clone();
}

Tensor new_column_major(const Shape& batch, int64_t rows, int64_t cols, DType dtype) {
  return matrices(empty(with_matrix(batch, cols, rows), dtype));
}

namespace {

std::string numerical_message(const std::string& api, int32_t info) {
  auto has = [&](const char* word) { return api.find(word) != std::string::npos; };
  if (info < 0) {
    if (has("svd")) return "The algorithm failed to converge because the input matrix contained non-finite values.";
    return fmt::format("Argument {} has illegal value. Most certainly there is a bug in the implementation calling "
                       "the backend library.",
                       -info);
  }
  if (has("inv")) {
    return fmt::format("The diagonal element {} is zero, the inversion could not be completed because the input "
                       "matrix is singular.",
                       info);
  }
  if (has("solve")) return "The solver failed because the input matrix is singular.";
  if (has("cholesky")) {
    return fmt::format("The factorization could not be completed because the input is not positive-definite (the "
                       "leading minor of order {} is not positive-definite).",
                       info);
  }
  if (has("svd")) {
    return fmt::format("The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
                       "repeated singular values (error code: {}).",
                       info);
  }
  if (has("eig")) {
    return fmt::format("The algorithm failed to converge because the input matrix is ill-conditioned or has too many "
                       "repeated eigenvalues (error code: {}).",
                       info);
  }
  if (has("lstsq")) {
    return fmt::format("The least squares solution could not be computed because the input matrix does not have full "
                       "rank (error code: {}).",
                       info);
  }
  if (has("lu_factor")) {
    return fmt::format("U[{},{}] is zero and using it on lu_solve would result in a division by zero. If you still "
                       "want to perform the factorization, consider calling linalg.lu(A, pivot) or "
                       "linalg.lu_factor_ex(A, pivot)",
                       info, info);
  }
  return fmt::format("Unknown error code: {}.", info);
}

}  // namespace

void check_errors(const Tensor& info, const std::string& api, bool is_matrix) {
  const Tensor flat = info.contiguous();
  const int32_t* codes = flat.data<int32_t>();
  const int64_t count = flat.numel();
  for (int64_t i = 0; i < count; ++i) {
    if (codes[i] == 0) continue;
    const std::string where = is_matrix ? "" : fmt::format(": (Batch element {})", i);
    const std::string message = api + where + ": " + numerical_message(api, codes[i]);
    // PyTorch raises lu_factor's zero pivot as a plain RuntimeError, the rest as LinAlgError.
    if (api.find("lu_factor") != std::string::npos) throw Error(ErrorKind::Runtime, message);
    throw LinAlgError(message, is_matrix ? -1 : i, codes[i]);
  }
}

const backend::LinalgKernels& kernels(const Tensor& t, const char* op) {
  return backend::linalg_kernels.on(t.device(), op);
}

Factors lu_factor_buffers(const Tensor& A, const Shape& batch, const char* op, bool of_transpose) {
  const int64_t m = A.size(-2), n = A.size(-1);
  check_lapack_extent(m, op);
  check_lapack_extent(n, op);
  Factors f;
  f.lu_buffer = of_transpose ? A.expand(with_matrix(batch, m, n)).clone() : column_major_copy(A, batch);
  f.pivots = empty(with_vector(batch, std::min(m, n)), DType::Int32);
  f.info = zeros(batch, DType::Int32);
  const int64_t count = batch_count(batch, op);
  if (count > 0) {
    kernels(A, op).lu_factor(current_context(), {A.dtype(), count, m, n, f.lu_buffer.data_ptr(),
                                                 f.pivots.data<int32_t>(), f.info.data<int32_t>()});
  }
  return f;
}

double epsilon_of(DType t) {
  return to_real(t) == DType::Float32 ? static_cast<double>(std::numeric_limits<float>::epsilon())
                                      : std::numeric_limits<double>::epsilon();
}

}  // namespace kiln::linalg::detail
