// Shared by the linalg front ends (internal): PyTorch's input checks and messages,
// batch broadcasting, column-major working copies and the info -> LinAlgError mapping.
#pragma once

#include <cstdint>
#include <string>

#include "backend/linalg.h"
#include "kiln/ops/linalg.h"
#include "kiln/tensor.h"

namespace kiln::linalg::detail {

// Defined, at least 2-D, float32/float64/complex64/complex128 (PyTorch's messages:
// "linalg.inv: Expected a floating point or complex tensor as input. Got Long").
void check_matrix_input(const Tensor& A, const char* op, const char* name = "A");
// "linalg.inv: A must be batches of square matrices, but they are 3 by 4 matrices".
void check_square(const Tensor& A, const char* op, const char* name = "A");
void check_same_dtype(const Tensor& A, const Tensor& B, const char* op, const char* a_name = "A",
                      const char* b_name = "B");

// The sizes before the last two.
Shape batch_shape(const Tensor& t);
int64_t batch_count(const Shape& batch, const char* op);
// An extent LAPACK takes as its 32-bit int.
void check_lapack_extent(int64_t extent, const char* op);

// A fresh column-major copy of t (expanded to batch + its last two sizes): the returned
// tensor is the working buffer, contiguous with shape batch + [cols, rows]; matrices()
// views it as batch + [rows, cols].
Tensor column_major_copy(const Tensor& t, const Shape& batch);
Tensor new_column_major(const Shape& batch, int64_t rows, int64_t cols, DType dtype);
inline Tensor matrices(const Tensor& buffer) { return buffer.transpose(-2, -1); }
Shape with_matrix(const Shape& batch, int64_t rows, int64_t cols);
Shape with_vector(const Shape& batch, int64_t length);

// PyTorch's _linalg_check_errors: the first non-zero info (int32, one per matrix)
// raised as LinAlgError with "(Batch element i)" for batched input; the message is
// chosen from `api` as PyTorch chooses it ("inv", "solve", "cholesky", "svd", "eig",
// "lstsq", "lu_factor").
void check_errors(const Tensor& info, const std::string& api, bool is_matrix);

const backend::LinalgKernels& kernels(const Tensor& t, const char* op);

// LU factors of square A as the kernels produce them: LU column-major buffer, pivots
// and info (int32).
struct Factors {
  Tensor lu_buffer, pivots, info;
};
// With of_transpose (square A only), the factors are those of Aᵀ, taken from a plain
// row-major copy of A (no transposing copy).
Factors lu_factor_buffers(const Tensor& A, const Shape& batch, const char* op, bool of_transpose = false);

// LAPACK's machine epsilon for a dtype's real part (float: 2^-23 as torch.finfo.eps).
double epsilon_of(DType t);

}  // namespace kiln::linalg::detail
