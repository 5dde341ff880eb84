// RMSNorm and LayerNorm on the CPU (internal header: no Highway here).
//
// norm_kernels.cpp holds the SIMD kernels (float32 and float64, compiled once per
// Highway target); norm_driver.cpp runs them over groups of rows on the thread pool,
// converting narrow inputs and outputs and applying the rounding steps each variant
// prescribes.
#pragma once

#include <cstdint>

#include "backend/norm.h"
#include "kiln/dtype.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

// ---- SIMD kernels over groups of contiguous rows (rows x cols, row-major) ----
// One call handles a whole group of rows, so many short rows (32 heads of 128) pay one
// dispatch, not several per row. Sums accumulate in T lanes (four independent vectors)
// over blocks of at most kNormSumBlock elements, and the block sums add in double: the
// rounding error of a float32 sum stays near kNormSumBlock / lanes additions however
// long the row.
inline constexpr int64_t kNormSumBlock = 1024;

// y_i = (x_i * r_i) * w with r_i = 1 / sqrt(mean(x_i^2) + eps), rounded after each
// product as PyTorch's two multiplies do; w null means y_i = x_i * r_i. y may equal x.
void rms_normalize_rows(const float* x, int64_t rows, int64_t cols, double eps, const float* w, float* y);
void rms_normalize_rows(const double* x, int64_t rows, int64_t cols, double eps, const double* w, double* y);
// y_i = a_i * w for every row i. y may equal a.
void mul_rows(const float* a, const float* w, float* y, int64_t rows, int64_t cols);
void mul_rows(const double* a, const double* w, double* y, int64_t rows, int64_t cols);
// y_i = ((x_i - mean_i) * rstd_i) * w + b, the biased variance taken in two passes
// (mean, then squared deviations: no cancellation when the mean is large against the
// spread); w and b may be null (1 and 0). y may equal x.
void layer_normalize_rows(const float* x, int64_t rows, int64_t cols, double eps, const float* w, const float* b,
                          float* y);
void layer_normalize_rows(const double* x, int64_t rows, int64_t cols, double eps, const double* w, const double* b,
                          double* y);

// The Highway targets (HWY_* bits) the kernels were compiled for; tests pin each.
int64_t norm_simd_targets();

// ---- the drivers ----

using backend::LayerNormProblem;
using backend::RmsNormKind;
using backend::RmsNormProblem;

void rms_norm_cpu(const RmsNormProblem& p, const ExecutionContext& ctx);
void layer_norm_cpu(const LayerNormProblem& p, const ExecutionContext& ctx);

}  // namespace kiln::cpu
