// Register-blocked forward substitution on a panel of right-hand sides held as SIMD
// lanes (float32 and float64; the small path of triangular_solve.cpp). Internal header.
#pragma once

#include <cstdint>

namespace kiln::cpu::linalg {

// Solves L X = X in place for one lower-triangular n x n matrix L and one panel X of
// `panel_lanes(wide)` right-hand sides per row. L(i, j) is a[i * a_row + j * a_col]
// (any strides, negative included: an upper solve is a lower one read backwards); row
// i of X is the vector at x + i * x_row (unaligned). Only the strict lower triangle of
// L is read, and its diagonal unless `unit`.
//   wide: the widest vector of the CPU (16 floats on AVX-512); narrow: at most 8 floats
//   or 4 doubles (one AVX2 register), for the 8-right-hand-side systems of the chunked
//   DeltaNet prefill.
int64_t panel_lanes_f32(bool wide);
int64_t panel_lanes_f64(bool wide);
void solve_lower_panel(bool wide, const float* a, int64_t a_row, int64_t a_col, float* x, int64_t x_row, int64_t n,
                       bool unit);
void solve_lower_panel(bool wide, const double* a, int64_t a_row, int64_t a_col, double* x, int64_t x_row, int64_t n,
                       bool unit);

}  // namespace kiln::cpu::linalg
