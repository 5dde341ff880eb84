// Many-row linear, Y[M, N] = X[M, K] W[N, K]^T (+ bias), through OpenBLAS.
//
// OpenBLAS runs single-threaded and kiln's pool splits the output columns (rows of W)
// into panels, as in blas.cpp. The bias initialises C and the product is added with
// beta = 1, so it costs no second pass over Y.
//   float32 / float64 weights: sgemm/dgemm read W in place (as B = W^T, CblasTrans); a
//     single row (float64 only: float32 has its own GEMV kernel) goes to gemv.
//   bfloat16 / float16 / float8_e4m3fn weights: each task widens its panel of W rows to
//     f32 (fp8 with the scales applied, exactly as the GEMV kernel decodes them) into a
//     buffer sized for L2, X is widened once, sgemm accumulates in f32, and C is rounded
//     to the activation dtype once at the end. OpenBLAS's sgemm kernels beat anything
//     hand-written here for M >= 2, and the widening costs K per weight row per call
//     against M*K multiply-adds.
//   bfloat16 and float8_e4m3fn weights on a CPU with AVX512-BF16 (unless KILN_BF16_DOT=0)
//     skip all of this: linear_gemm_bf16_dot / linear_gemm_fp8_bf16_dot
//     (bf16_dot_gemm.cpp) round x to bf16 and multiply with vdpbf16ps, twice the
//     multiply-adds per instruction of an f32 FMA (FP8 panels decoded exactly to bf16).
#include <algorithm>
#include <climits>
#include <cstring>

#include "backend/cpu/matmul/blas.h"
#include "backend/cpu/cast/cast.h"
#include "backend/cpu/linear/bf16_dot_gemm.h"
#include "backend/cpu/linear/linear_kernels.h"
#include "kiln/cpu_features.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

namespace {

// Multiply-adds a task should have at least before it is worth handing to a thread
// (~0.1 ms of single-core float work; the same figure as blas.cpp).
constexpr double kMinTaskWork = 1 << 20;
// Panels are multiples of this many W rows: OpenBLAS's micro-kernels stay on full tiles.
constexpr int64_t kPanelAlign = 16;
// Bytes of a widened f32 panel of W. sgemm packs the whole X again for every panel (and
// its own blocks of the panel, so the panel need not fit in L2): with 256 KiB panels a
// 512-row prefill re-packed X every 32 rows (every 16 at K = 4096) and ran at ~0.5x of
// what 8 MiB panels give. Measured on 2 loaded cores, bf16 W, 512 rows of x, against
// 256 KiB: 4096x2048 1.6-2.0x, 512x2048 1.4-2.1x, 2048x4096 2.5x; 8 MiB against 2 MiB
// 1.1-1.25x on the large shapes.
constexpr int64_t kWidePanelBytes = int64_t{8} << 20;
// Elements per task when widening X or rounding C.
constexpr int64_t kConvertGrain = int64_t{1} << 16;

// W rows per panel: at most `cap`, at least one aligned group, and small enough that every
// thread gets a panel when N allows.
int64_t panel_rows(int64_t N, int64_t cap, int threads) {
  const int64_t per_thread = ceil_div(ceil_div(N, threads), kPanelAlign) * kPanelAlign;
  return std::max<int64_t>(kPanelAlign, std::min(cap, per_thread));
}

int64_t panel_grain(int64_t M, int64_t K, int64_t rows) {
  const double work = static_cast<double>(M) * static_cast<double>(K) * static_cast<double>(rows);
  return std::max<int64_t>(1, static_cast<int64_t>(kMinTaskWork / std::max(work, 1.0)));
}

// C[m, n0 + j] = bias[(n0 + j) * stride] for every row m; returns the beta to use.
template <typename T>
T init_with_bias(const T* bias, int64_t stride, T* c, int64_t ldc, int64_t M, int64_t n0, int64_t cols) {
  if (bias == nullptr) return T(0);
  for (int64_t m = 0; m < M; ++m) {
    T* row = c + m * ldc + n0;
    for (int64_t j = 0; j < cols; ++j) row[j] = bias[(n0 + j) * stride];
  }
  return T(1);
}

// W already has the activations' dtype (float32 or float64).
template <typename T>
void gemm_in_place(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act) {
  const int64_t M = act.M, N = w.N, K = w.K;
  const T* x = static_cast<const T*>(act.x);
  const T* wt = static_cast<const T*>(w.data);
  const T* bias = static_cast<const T*>(act.bias);
  T* y = static_cast<T*>(act.y);
  // One W row is never stepped over, so its stride is free.
  const int64_t ldw = N == 1 ? K : w.row_stride;
  const int64_t rows = panel_rows(N, N, pool.num_threads());
  pool.parallel_for(ceil_div(N, rows), panel_grain(M, K, rows), [&](int64_t p0, int64_t p1) {
    const int64_t n0 = p0 * rows, cols = std::min(N, p1 * rows) - n0;
    const T beta = init_with_bias(bias, act.bias_stride, y, N, M, n0, cols);
    if (M == 1) {
      blas::gemv(false, static_cast<int>(cols), static_cast<int>(K), wt + n0 * ldw, static_cast<int>(ldw), x, 1, beta,
                 y + n0, 1);
    } else {
      // B = W^T: W's rows read in place as a transposed operand.
      blas::gemm(false, true, static_cast<int>(M), static_cast<int>(cols), static_cast<int>(K), x, static_cast<int>(K),
                 wt + n0 * ldw, static_cast<int>(ldw), beta, y + n0, static_cast<int>(N));
    }
  });
}

// Converts n elements between float32 and `dtype` over the pool.
void convert_parallel(ThreadPool& pool, int64_t n, bool to_float, DType dtype, const void* src, void* dst) {
  const size_t isz = itemsize(dtype);
  pool.parallel_for(n, kConvertGrain, [&](int64_t i0, int64_t i1) {
    if (to_float) {
      to_f32(dtype, static_cast<const char*>(src) + i0 * isz, static_cast<float*>(dst) + i0, i1 - i0);
    } else {
      from_f32(static_cast<const float*>(src) + i0, dtype, static_cast<char*>(dst) + i0 * isz, i1 - i0);
    }
  });
}

// W is bfloat16, float16 or float8_e4m3fn: widened to f32 panel by panel.
void gemm_widened(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act) {
  const int64_t M = act.M, N = w.N, K = w.K;
  const bool f32_io = act.dtype == DType::Float32;

  Tensor x_wide, c_wide, bias_wide;
  const float* x = static_cast<const float*>(act.x);
  float* c = static_cast<float*>(act.y);
  if (!f32_io) {
    x_wide = Tensor::empty({M * K});
    convert_parallel(pool, M * K, true, act.dtype, act.x, x_wide.data_ptr());
    x = x_wide.data<float>();
    c_wide = Tensor::empty({M * N});
    c = c_wide.data<float>();
  }
  const float* bias = nullptr;
  if (act.bias != nullptr) {
    const int64_t bias_len = act.bias_stride == 0 ? 1 : N;
    bias_wide = Tensor::empty({bias_len});
    to_f32(act.dtype, act.bias, bias_wide.data<float>(), bias_len);
    bias = bias_wide.data<float>();
  }

  const int64_t cap = std::max<int64_t>(kPanelAlign, kWidePanelBytes / (K * 4) / kPanelAlign * kPanelAlign);
  const int64_t rows = panel_rows(N, cap, pool.num_threads());
  const size_t w_isz = itemsize(w.dtype);
  pool.parallel_for(ceil_div(N, rows), panel_grain(M, K, rows), [&](int64_t p0, int64_t p1) {
    Tensor panel_buf = Tensor::empty({rows * K});
    float* panel = panel_buf.data<float>();
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * rows, cols = std::min(N, n0 + rows) - n0;
      if (w.dtype == DType::Float8_e4m3fn) {
        fp8_rows_to_f32(w, n0, cols, panel);
      } else {
        for (int64_t r = 0; r < cols; ++r) {
          to_f32(w.dtype, static_cast<const char*>(w.data) + (n0 + r) * w.row_stride * w_isz, panel + r * K, K);
        }
      }
      const float beta = init_with_bias(bias, act.bias_stride == 0 ? 0 : 1, c, N, M, n0, cols);
      blas::gemm(false, true, static_cast<int>(M), static_cast<int>(cols), static_cast<int>(K), x, static_cast<int>(K),
                 panel, static_cast<int>(K), beta, c + n0, static_cast<int>(N));
    }
  });
  if (!f32_io) convert_parallel(pool, M * N, false, act.dtype, c, act.y);
}

// BLAS needs each W row to start at least K elements after the previous one, and the
// step to fit in an int.
bool blas_steps_over_rows(const LinearWeight& w) {
  return w.N <= 1 || (w.row_stride >= w.K && w.row_stride <= INT_MAX);
}

// W's rows copied into a contiguous [N, K] buffer (held by `keep`).
LinearWeight packed_rows(ThreadPool& pool, const LinearWeight& w, Tensor& keep) {
  const int64_t isz = static_cast<int64_t>(itemsize(w.dtype));
  const size_t row_bytes = static_cast<size_t>(w.K * isz);
  keep = Tensor::empty({w.N, w.K}, w.dtype);
  const char* src = static_cast<const char*>(w.data);
  char* dst = static_cast<char*>(keep.data_ptr());
  const int64_t grain = std::max<int64_t>(1, kConvertGrain / std::max<int64_t>(w.K, 1));
  pool.parallel_for(w.N, grain, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      std::memcpy(dst + n * w.K * isz, src + n * w.row_stride * isz, row_bytes);
    }
  });
  LinearWeight packed = w;
  packed.data = dst;
  packed.row_stride = w.K;
  return packed;
}

}  // namespace

void linear_gemm(ThreadPool& pool, const LinearWeight& weight, const LinearActivations& act) {
  // bf16 weights on a CPU with a bf16 dot instruction: x rounded to bf16, vdpbf16ps
  // (bf16_dot_gemm.h); KILN_BF16_DOT=0 keeps the widened sgemm below.
  if (weight.dtype == DType::BFloat16 && bf16_dot_enabled()) return linear_gemm_bf16_dot(pool, weight, act);
  // FP8 weights too: their e4m3 values are exact bf16 values, decoded per panel.
  if (weight.dtype == DType::Float8_e4m3fn && bf16_dot_enabled()) return linear_gemm_fp8_bf16_dot(pool, weight, act);
  // float32 / float64 weights are read in place by BLAS.
  const bool in_place = weight.dtype == act.dtype && (act.dtype == DType::Float32 || act.dtype == DType::Float64);
  Tensor packed_keep;
  const LinearWeight w = in_place && !blas_steps_over_rows(weight) ? packed_rows(pool, weight, packed_keep) : weight;
  KILN_CHECK_KIND(act.M <= INT_MAX && w.N <= INT_MAX && w.K <= INT_MAX && (w.N == 1 || w.row_stride <= INT_MAX),
                  NotImplemented, "linear",
                  "matrices with a dimension or row stride beyond 2^31 - 1 are not supported (M={}, N={}, K={})",
                  act.M, w.N, w.K);
  ensure_blas_single_threaded();
  if (in_place && act.dtype == DType::Float32) return gemm_in_place<float>(pool, w, act);
  if (in_place) return gemm_in_place<double>(pool, w, act);
  gemm_widened(pool, w, act);
}

}  // namespace kiln::cpu
