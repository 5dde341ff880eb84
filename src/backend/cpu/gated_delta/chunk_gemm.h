// Register-blocked products of the chunked gated delta rule (internal): the small GEMMs
// of one (head, chunk) item, 64 to 128 rows of 64 to 128 columns, whose operands already
// sit in L1/L2 in a usable layout. OpenBLAS packs both operands on every such call, which
// cost a quarter of its time at these sizes; this kernel reads them where they are.
// Compiled once per Highway target (chunk_gemm.cpp).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// One product term: A (rows x k) times B (k x cols).
//   A(i, p) = a[i * a_row + p * a_col]  (any strides: a transposed A is a_row 1, a_col lda)
//   B(p, j) = b[p * ldb + j]            (row-major, unit column stride)
// lower: A is lower triangular and row i sums p <= i only; A above the diagonal is not read.
struct ChunkGemmTerm {
  const float* a = nullptr;
  int64_t a_row = 0;
  int64_t a_col = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  int64_t k = 0;
  bool lower = false;
};

// Rows of memory the caller reads next (the next chunk's inputs), prefetched a few at a
// time between the product's tiles: rows rows of row_floats floats, stride floats apart.
// Their first read otherwise waits on DRAM (token rows lie a page or more apart, where
// the hardware prefetchers do not follow); spread over a product, the misses overlap its
// arithmetic. Never read by the product itself.
struct ChunkGemmPrefetch {
  const float* base = nullptr;
  int64_t stride = 0;
  int64_t rows = 0;
  int64_t row_floats = 0;
};

// C = init + row_scale ⊙ (first) + second, with
//   init = accumulate ? c_scale * C : 0,
//   row_scale: first_row_scale[i] scales row i of the first term (nullptr: 1),
//   second: absent when second.k == 0.
// C(i, j) = c[i * ldc + j]. With lower_cols only columns j <= i are wanted: whole vectors
// past a row's diagonal may be written with their product too, and C is left as it was
// past those. Sums run in p order per term (fixed: the result does not depend on threads).
struct ChunkGemmProblem {
  int64_t rows = 0;
  int64_t cols = 0;
  ChunkGemmTerm first;
  const float* first_row_scale = nullptr;
  ChunkGemmTerm second;
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  float c_scale = 1.0f;
  bool lower_cols = false;
  ChunkGemmPrefetch prefetch;
};

void chunk_gemm(const ChunkGemmProblem& p);

// The Highway targets chunk_gemm was compiled for (tests run each).
int64_t chunk_gemm_simd_targets();

}  // namespace kiln::cpu
