// The matmul family of the kernel table: the batched product behind matmul, mm, bmm, mv
// and dot (front end: src/ops/matmul.cpp).
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// One operand of a batched GEMM: matrix i starts at element base + batch_offsets[i] and
// its element (r, c) is at r * row_stride + c * col_stride (all in elements).
struct GemmOperand {
  const void* base = nullptr;
  const int64_t* batch_offsets = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

// C[i] = A[i] @ B[i] for i < batch, where A[i] is M x K, B[i] is K x N and C is a
// contiguous [batch, M, N] array of `dtype`.
struct BatchedGemm {
  DType dtype = DType::Float32;
  int64_t batch = 0, M = 0, N = 0, K = 0;
  GemmOperand a, b;
  void* c = nullptr;
};

struct MatmulKernels {
  // Whether gemm_batched computes this dtype.
  bool (*supports)(DType dtype) = nullptr;
  // Whether gemm_batched reads a rows x cols operand of `dtype` with these strides in
  // place; the front end makes other operands contiguous first.
  bool (*reads_in_place)(DType dtype, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) = nullptr;
  void (*gemm_batched)(const ExecutionContext& ctx, const BatchedGemm& p) = nullptr;
};

inline KernelTable<MatmulKernels> matmul_kernels{"matmul"};

}  // namespace kiln::backend
