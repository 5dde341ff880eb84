// One panel of a GEMM, as blas.cpp hands it to a kernel, and the integer kernel
// (internal to backend/cpu).
#pragma once

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::cpu {

// C (m x n, row stride ldc, unit column stride) = A (m x k) @ B (k x n); strides in
// elements, pointers at element (0, 0).
struct GemmTile {
  const char* a;
  int64_t a_rs, a_cs;
  const char* b;
  int64_t b_rs, b_cs;
  char* c;
  int64_t ldc;
  int64_t m, n, k;
};

// Exact integer product: sums in 64 bits modulo 2^64 and stores the low bits, which is
// the two's-complement wrap PyTorch's integer mm gives. `dtype` is an integer dtype.
void integer_gemm_tile(DType dtype, const GemmTile& tile);

}  // namespace kiln::cpu
