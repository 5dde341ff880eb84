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

#include "backend/grouped_mm.h"
#include "kiln/dtype.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

using backend::GroupedMmArgs;
using backend::GroupedMmCase;
using backend::GroupedOperand;

// Computes the grouped product (the contract is in backend/grouped_mm.h).
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
