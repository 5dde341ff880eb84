// CPU kernels behind linear and linear_fp8 (internal; the front ends are
// src/ops/linear.cpp and src/ops/linear_fp8.cpp).
//
//   gemv_*        one activation row: y[n] = scale_n * sum_k x[k] W[n, k] + bias[n], a
//                 SIMD kernel per weight dtype (gemv_<dtype>.cpp, compiled per Highway
//                 target) that streams W once at memory speed. Decode is a bandwidth
//                 race: see gemv-inl.h for the instruction budget and the decode tricks.
//   linear_gemm   many rows: OpenBLAS sgemm/dgemm; narrow weights are widened to f32
//                 one panel at a time (accumulation in f32).
//   fp8 quantise  row-wise quantisation to float8_e4m3fn and dequantisation.
#pragma once

#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

// Side of the square weight blocks that share one scale in HF FP8 checkpoints
// (`weight_block_size: [128, 128]`).
inline constexpr int64_t kFp8ScaleBlock = 128;

// How a float8_e4m3fn weight's float32 scales are laid out (w_real = w_fp8 * scale).
enum class Fp8ScaleLayout {
  PerRow,    // scale[n]: one per output row
  Block128,  // scale[n / 128 * ceil(K / 128) + k / 128]: HF `weight_scale_inv`
};

// The weight operand shared by both paths: N rows of K elements, row n starting at
// data + n * row_stride elements, unit stride inside a row. Any row stride >= 0 works
// for the GEMV kernels (rows may even overlap); linear_gemm's direct BLAS path needs
// row_stride >= K when N > 1.
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

// Activations x, bias and output y all have `dtype` (float32, bfloat16 or float16 for the
// GEMV kernels; also float64 for linear_gemm). x is a contiguous [M, K] array, y a
// contiguous [M, N] array; the bias (optional) is bias[n * bias_stride], where stride 0
// broadcasts one value to every output.
struct LinearActivations {
  DType dtype = DType::Float32;
  const void* x = nullptr;
  int64_t M = 1;
  const void* bias = nullptr;
  int64_t bias_stride = 1;
  void* y = nullptr;
};

// Floats of per-call scratch the GEMV kernels need for x converted to f32 (K padded to
// whole SIMD steps on every target).
int64_t gemv_scratch_floats(int64_t K);

// One-row linear (act.M must be 1) for weight dtype float32 / bfloat16 / float16 (then
// act.dtype == weight.dtype) or float8_e4m3fn (act.dtype float32, bfloat16 or float16).
// K > 0. `x_scratch` holds gemv_scratch_floats(K) floats. Rows are split over the pool.
using GemvFn = void (*)(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);
void gemv_f32(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);
void gemv_bf16(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);
void gemv_f16(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);
void gemv_fp8(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch);

// The Highway targets (HWY_* bits) any GEMV kernel was compiled for (the FP8 kernel also
// has AVX3_DL); tests pin each one the CPU supports with hwy::SetSupportedTargetsForTest
// (a kernel without that target then runs its best lower one).
int64_t gemv_simd_targets();

// Decodes `rows` rows of a float8_e4m3fn weight starting at row n0 into a contiguous
// float32 [rows, K] panel with the scales applied, exactly as the GEMV kernel reads them
// (so codes 0x7F/0xFF read as ±480, see gemv-inl.h).
void fp8_rows_to_f32(const LinearWeight& w, int64_t n0, int64_t rows, float* out);

// Any number of rows (including one, for float64) through OpenBLAS: float32/float64
// weights of act.dtype are read in place, other weights are widened to f32 panels.
// K > 0, M > 0, N > 0.
void linear_gemm(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act);

// Row-wise float8_e4m3fn quantisation of an [N, K] float32 / bfloat16 / float16 matrix
// (rows at w + n * row_stride elements, unit inner stride): scale[n] = max_k |w[n, k]| / 448
// (1 for an all-zero row), q[n, k] = e4m3fn(w[n, k] / scale[n]) rounded to nearest even,
// q contiguous. Returns the first row holding inf or NaN (q and scale are then
// unspecified), or -1. With row_sq_error / row_sq_norm (both or neither), also writes per
// row sum_k (q[n, k] * scale[n] - w[n, k])^2 and sum_k w[n, k]^2 in float64, from the
// same pass (the quantisation error report of loading a model as FP8).
int64_t quantize_fp8_rows(ThreadPool& pool, const void* w, DType dtype, int64_t row_stride, int64_t N, int64_t K,
                          uint8_t* q, float* scale, double* row_sq_error = nullptr, double* row_sq_norm = nullptr);

// out[n, k] = float(W[n, k]) * its scale, in float32, contiguous [N, K]; the exact cast,
// so the NaN codes stay NaN (unlike the GEMV decode).
void dequantize_fp8_rows(ThreadPool& pool, const LinearWeight& w, float* out);

}  // namespace kiln::cpu
