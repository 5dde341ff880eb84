// Register-blocked forward substitution on a panel of right-hand sides held as SIMD
// lanes (float32 and float64; the small path of triangular_solve.cpp). Internal header.
#pragma once

#include <cstdint>

namespace kiln::cpu::linalg {

// How many right-hand sides a panel holds: narrow, at most one AVX2 register (8 floats,
// 4 doubles; the chunked DeltaNet prefill's 8-right-hand-side systems); wide, the
// CPU's widest vector (16 floats on AVX-512); double, two of those per row.
enum class PanelWidth { kNarrow = 0, kWide = 1, kDouble = 2 };

// The Highway targets the kernel is compiled for (HWY_* bits; tests pin each in turn).
int64_t triangular_panel_simd_targets();

int64_t panel_lanes(PanelWidth width, float);
int64_t panel_lanes(PanelWidth width, double);

// The layouts of L the kernel reads in place: L(i, j) at a[i * a_row + j * a_col] with
// a_col = +-1 and a_row = a_col * s, s in {16, 32, 64}: a row-major 16/32/64 block (or a
// block of a matrix with such rows), walked forwards for a lower solve or backwards for
// an upper one. Those strides are compiled in, so the kernel addresses a block's rows
// as constant offsets from one pointer (no row pointer per row in a register). Any other
// layout is packed by the caller into rows of kPackedRowStride (a_col = 1).
constexpr int64_t kPackedRowStride = 64;
bool panel_reads_in_place(int64_t a_row, int64_t a_col);

// Solves L X = X in place for one lower-triangular n x n matrix L (n <= 64, in one of
// the layouts above) and one panel X of panel_lanes(width) right-hand sides per row; row
// i of X is the panel_lanes values at x + i * x_row (unaligned, any sign). Only the
// strict lower triangle of L is read, and its diagonal unless `unit`.
void solve_lower_panel(PanelWidth width, const float* a, int64_t a_row, int64_t a_col, float* x, int64_t x_row,
                       int64_t n, bool unit);
void solve_lower_panel(PanelWidth width, const double* a, int64_t a_row, int64_t a_col, double* x, int64_t x_row,
                       int64_t n, bool unit);

}  // namespace kiln::cpu::linalg
