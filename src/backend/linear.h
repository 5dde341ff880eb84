// The linear family of the kernel table: linear and linear_fp8 (any number of rows), and
// the FP8 row quantisation helpers (front ends: src/ops/linear.cpp, linear_fp8.cpp).
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"
#include "kiln/scalar_types.h"  // kFp8ScaleBlock

namespace kiln::backend {

// How a float8_e4m3fn weight's float32 scales are laid out (w_real = w_fp8 * scale).
enum class Fp8ScaleLayout {
  PerRow,    // scale[n]: one per output row
  Block128,  // scale[n / 128 * ceil(K / 128) + k / 128]: HF `weight_scale_inv`
};

// The weight: N rows of K elements, row n starting at data + n * row_stride elements,
// unit stride inside a row. Any row stride >= 0 works (rows may even overlap).
struct LinearWeight {
  const void* data = nullptr;
  DType dtype = DType::Float32;
  int64_t row_stride = 0;
  int64_t N = 0;
  int64_t K = 0;
  // float8_e4m3fn only: contiguous float32 scales in `scale_layout`.
  const float* scale = nullptr;
  Fp8ScaleLayout scale_layout = Fp8ScaleLayout::PerRow;
};

// Activations x, bias and output y all have `dtype`: the weight's dtype (float32, float64,
// bfloat16 or float16), or float32 / bfloat16 / float16 for a float8_e4m3fn weight. x is a
// contiguous [M, K] array, y a contiguous [M, N] array; the bias (optional) is
// bias[n * bias_stride], where stride 0 broadcasts one value to every output.
struct LinearActivations {
  DType dtype = DType::Float32;
  const void* x = nullptr;
  int64_t M = 1;
  const void* bias = nullptr;
  int64_t bias_stride = 1;
  void* y = nullptr;
};

// Row-wise float8_e4m3fn quantisation of an [N, K] float32 / bfloat16 / float16 matrix
// `w` (its scale fields unused) into contiguous q [N, K] and scale [N]; with
// row_sq_error / row_sq_norm (both or neither), also the per-row float64 error report.
struct Fp8RowQuantization {
  LinearWeight w;
  uint8_t* q = nullptr;
  float* scale = nullptr;
  double* row_sq_error = nullptr;
  double* row_sq_norm = nullptr;
};

struct LinearKernels {
  // y = x W^T (+ bias), W's scales applied; M, N, K > 0. One row is the decode GEMV, a
  // bandwidth race: the entry adds no allocation to it.
  void (*linear)(const ExecutionContext& ctx, const LinearWeight& w, const LinearActivations& act) = nullptr;
  // Returns the first row holding inf or NaN (outputs then unspecified), or -1. N, K > 0.
  int64_t (*quantize_fp8_rows)(const ExecutionContext& ctx, const Fp8RowQuantization& p) = nullptr;
  // out = float(W) * scale as contiguous float32 [N, K] (the exact cast: NaN stays NaN).
  void (*dequantize_fp8_rows)(const ExecutionContext& ctx, const LinearWeight& w, float* out) = nullptr;
};

inline KernelTable<LinearKernels> linear_kernels{"linear"};

}  // namespace kiln::backend
