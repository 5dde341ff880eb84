// Reduction kernels: the per-dtype inner loops that reduce_loop.cpp drives.
//
// A kernel reduces one piece of the input (a contiguous row block, or a block of rows
// of contiguous columns) into ReducePartial states; the driver combines the partials
// of one output in a fixed pairwise order, so results never depend on the thread
// count. Kernels see their compute dtype only: float32 (for f32 and, after the driver
// widens them, f16/bf16/fp8), float64, the integers and bool, complex64/128.
// Internal header: no Highway here.
#pragma once

#include <cstdint>

#include "backend/reduce.h"
#include "kiln/dtype.h"

namespace kiln::cpu {

using backend::ReduceKind;

struct ReduceParams {
  double p = 2.0;  // SumPowAbs only
};

// The state of a reduction over part of one output's elements.
//   float results: v[0] (complex: v[0] real, v[1] imaginary), combined in double
//   integer results (and integer max/min values): i, as int64 bits (uint64 wraps)
//   arg ops: the value in v[0] (float) or i (integer), the flat index in `index`
//   MeanM2: count, mean in v[0], sum of squared deviations in m2
struct ReducePartial {
  double v[2] = {0.0, 0.0};
  double m2 = 0.0;
  int64_t i = 0;
  int64_t index = 0;
  int64_t count = 0;
};

// Reduces x[0, n) (n >= 1, contiguous) into *out. `index0` is the flat index of x[0]
// along the reduction, for the arg ops.
using RowReduceFn = void (*)(const void* x, int64_t n, int64_t index0, const ReduceParams& params,
                             ReducePartial* out);
// Reduces column j of rows[0, nrows) (each row w contiguous elements, nrows >= 1) into
// out[j], for j < w. Row r has flat index index0 + r along the reduction.
using ColumnReduceFn = void (*)(const void* const* rows, int64_t nrows, int64_t w, int64_t index0,
                                const ReduceParams& params, ReducePartial* out);
// acc = acc (+) next, where next covers elements after acc's (arg ops keep the earlier
// index among equal values).
using CombineFn = void (*)(ReducePartial* acc, const ReducePartial& next);

struct ReduceKernel {
  RowReduceFn row;
  ColumnReduceFn column;
  CombineFn combine;
};

// Most rows a column kernel is given at once (arg kernels count rows in float lanes).
inline constexpr int64_t kColumnBlockRows = 128;
// Most elements a row kernel is given at once: a block stays in cache for the
// two-pass kernels (var, arg ops), and long rows split into blocks share out across
// threads.
inline constexpr int64_t kRowBlock = 16384;

// The kernels for `kind` on `compute` (a dtype kernels run in: not f16/bf16/fp8).
// kiln::Error (NotImplemented) for a pair with no kernel; front ends reject those first.
ReduceKernel reduce_kernel(ReduceKind kind, DType compute);
// The dtype the kernels for `kind` run in for input of dtype `input`: f16/bf16/fp8
// widen to float32, and MeanM2 runs every real float dtype in float64.
DType reduce_compute_dtype(ReduceKind kind, DType input);
// The state of a reduction over no elements (sum 0, prod 1, count 0); kiln::Error for
// the kinds that have none (max, min, arg ops).
ReducePartial reduce_identity(ReduceKind kind);

// Column kernels are given at most 2 * kColumnBlockWidth floats per row (the driver
// hands out kColumnBlockWidth elements; a complex element is two floats).
inline constexpr int64_t kColumnBlockWidth = 256;

// ---- Highway entry points ----
// reduce_kernels_sum.cpp: Sum, Prod, SumAbs, SumSquares, CountNonZero (f32, f64), MeanM2 (f64).
ReduceKernel reduce_sum_kernels_f32(ReduceKind kind);
ReduceKernel reduce_sum_kernels_f64(ReduceKind kind);
// reduce_kernels_minmax.cpp: Max, Min, MaxAbs, MinAbs, ArgMax, ArgMin (f32, f64).
ReduceKernel reduce_minmax_kernels_f32(ReduceKind kind);
ReduceKernel reduce_minmax_kernels_f64(ReduceKind kind);
// reduce_kernels_int.cpp: Sum, Prod, Max, Min, ArgMax, ArgMin for bool and integers.
ReduceKernel reduce_int_kernel(ReduceKind kind, DType dtype);
// Sums of interleaved (re, im) pairs, for complex rows: out->v[0] sums the even
// positions, v[1] the odd ones. n counts reals and is even.
void sum_pairs_row_f32(const float* x, int64_t n, ReducePartial* out);
void sum_pairs_row_f64(const double* x, int64_t n, ReducePartial* out);
// The Highway targets the SIMD kernels were compiled for (tests pin each one).
int64_t reduce_simd_targets();

// Float combine functions shared by the float and complex tables.
void combine_sum(ReducePartial* acc, const ReducePartial& next);
void combine_prod_real(ReducePartial* acc, const ReducePartial& next);
void combine_max(ReducePartial* acc, const ReducePartial& next);
void combine_min(ReducePartial* acc, const ReducePartial& next);
void combine_argmax(ReducePartial* acc, const ReducePartial& next);
void combine_argmin(ReducePartial* acc, const ReducePartial& next);
void combine_mean_m2(ReducePartial* acc, const ReducePartial& next);

}  // namespace kiln::cpu
