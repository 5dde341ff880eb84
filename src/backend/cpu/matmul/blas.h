// Batched GEMM on the CPU (internal): OpenBLAS for float32/float64/complex, an exact
// blocked loop for integers. Front ends (ops/matmul.cpp, and later linear) describe
// each operand by a base pointer, per-batch offsets and 2-D strides; this layer picks
// NoTrans/Trans and the leading dimension, so transposed operands are never copied.
//
// Threading: kiln's pool does all the parallel work and OpenBLAS runs single-threaded
// (ensure_blas_single_threaded). Each GEMM is cut into row (or column) panels and the
// (batch, panel) pairs are spread over the pool. Two pools that each spin while idle
// fight over the same cores (2 on our build machines), and OpenBLAS's own threading
// cannot help a batch of small matrices; one pool handles both cases and nested calls.
#pragma once

#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

// One operand of a batched GEMM: matrix i starts at element base + batch_offsets[i] and
// its element (r, c) is at r * row_stride + c * col_stride (all in elements).
struct GemmOperand {
  const void* base = nullptr;
  const int64_t* batch_offsets = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

// Whether OpenBLAS can read a rows x cols matrix with these strides in place: row- or
// column-major with a unit inner stride and a leading dimension that covers the other
// extent and fits in a 32-bit int. The stride of a dim of extent 1 never matters.
bool blas_accepts(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// Whether gemm_batched computes this dtype: float32, float64, complex64, complex128 and
// every integer dtype.
bool gemm_supports(DType dtype);

// C[i] = A[i] @ B[i] for i < batch, where A[i] is M x K, B[i] is K x N and C is a
// contiguous [batch, M, N] array of `dtype`. For the BLAS dtypes both operands must
// satisfy blas_accepts; integers take any strides. M, N and K must fit in an int.
void gemm_batched(ThreadPool& pool, DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                  const GemmOperand& a, const GemmOperand& b, void* c);

// Sets OpenBLAS to one thread, once per process (see the threading note above). Code
// that calls OpenBLAS or LAPACK directly from kiln's workers should call this first.
void ensure_blas_single_threaded();

}  // namespace kiln::cpu
