// CPU kernel behind grouped_mm and grouped_mm_fp8 (internal; the front end is
// src/ops/grouped_mm.cpp).
//
// The kernel reads the group boundaries (offs) itself: one pass over offs turns the call
// into a list of (group, row tile, column tile) work items, and a single parallel region
// covers all of them, split by estimated cost. There is no per-group barrier and no
// per-group host loop calling mm.
//
// Each work item runs one of three paths:
//   - small groups (a handful of rows, the MoE decode case) whose B is column-major (the
//     Hugging Face expert layout [G, N, K] seen through w.transpose(-2, -1)) and whose A
//     rows are contiguous: the bandwidth-bound one-row GEMV kernels of linear
//     (gemv_bf16/f16/f32/fp8), once per row over a column tile small enough to stay in L2,
//     so each expert's weights are streamed from memory once.
//   - small groups with a row-major B: small_rows_times_rowmajor (grouped_mm_simd.cpp), a
//     register-blocked SIMD loop that widens B as it streams it.
//   - everything else: A and B tiles widened to float32 and OpenBLAS sgemm, single-threaded
//     per tile (kiln's pool does the parallel work), then the output cast. (For groups of
//     a few rows both small-group paths beat it ~2.5-3x: see kSmallGroupRows.)
#pragma once

#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

// Which of torch.grouped_mm's four cases a call is (see include/kiln/ops/grouped_mm.h).
enum class GroupedMmCase {
  Jagged2Dx3D,   // A [M_total, K], B [G, K, N]       -> out [M_total, N], rows grouped
  Jagged3Dx2D,   // A [G, M, K],    B [K, N_total]    -> out [M, N_total], columns grouped
  Jagged2Dx2D,   // A [M, K_total], B [K_total, N]    -> out [G, M, N],    K grouped
  Batched3Dx3D,  // A [G, M, K],    B [G, K, N]       -> out [G, M, N],    plain bmm
};

// An operand: element (batch, r, c) of the last two dims is at
// data + batch * batch_stride + r * row_stride + c * col_stride (elements). 2-D operands
// ignore batch_stride. rows/cols are the sizes of the last two dims. The last two dims are
// row-major (col_stride == 1) or column-major (row_stride == 1), as the front end checks.
struct GroupedOperand {
  const void* data = nullptr;
  DType dtype = DType::Float32;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};

struct GroupedMmArgs {
  GroupedMmCase kind = GroupedMmCase::Jagged2Dx3D;
  GroupedOperand a;
  GroupedOperand b;  // float32/bfloat16/float16 like a, or float8_e4m3fn (grouped_mm_fp8)
  // float8_e4m3fn b only: contiguous float32 [G, N] scales, out[:, n] of group g is
  // multiplied by b_scale[g * N + n] after the dot products.
  const float* b_scale = nullptr;
  int64_t groups = 0;
  // G int32 exclusive cumulative ends (nullptr for Batched3Dx3D), read by the kernel.
  const int32_t* offs = nullptr;
  // Output of `out_dtype` (a's dtype), contiguous, shaped as listed for `kind`.
  void* out = nullptr;
  DType out_dtype = DType::Float32;
};

// Computes the grouped product. Offsets that decrease or leave [0, extent] of the grouped
// dimension are a Value error (raised before any output is written). Rows (2Dx3D) or
// columns (3Dx2D) past offs[G-1] are not written.
void grouped_mm(ThreadPool& pool, const GroupedMmArgs& args);

// c[r, j] = sum_k a[r, k] * B[k, j] for r < rows, j < n (the row-major small-group path):
// a float32 (row stride lda), B float32/bfloat16/float16 with unit column stride and row
// stride ldb, c float32 (row stride ldc); float32 accumulation. Single-threaded.
void small_rows_times_rowmajor(const float* a, int64_t lda, int64_t rows, const void* b, DType b_dtype, int64_t ldb,
                               int64_t k, int64_t n, float* c, int64_t ldc);

// The Highway targets (HWY_* bits) small_rows_times_rowmajor was compiled for; tests pin
// each one the CPU supports with hwy::SetSupportedTargetsForTest.
int64_t grouped_mm_simd_targets();

}  // namespace kiln::cpu
