// Row-wise float8_e4m3fn quantisation and dequantisation of weight matrices.
//
// One row at a time through a float32 buffer: widen (SIMD, cast.h), find the row's
// absolute maximum, divide by the scale, and round with the SIMD float32 -> e4m3fn cast,
// whose saturation to ±448 absorbs the rounding of amax / (amax / 448) above 448.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/linear/linear_kernels.h"
#include "kiln/int_math.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

namespace {

// e4m3fn's largest finite value.
constexpr float kFp8Max = 448.0f;
// Elements a task should convert at least before it is worth a thread.
constexpr int64_t kMinTaskElements = int64_t{1} << 16;

int64_t row_grain(int64_t K) { return std::max<int64_t>(1, kMinTaskElements / std::max<int64_t>(K, 1)); }

}  // namespace

int64_t quantize_fp8_rows(ThreadPool& pool, const void* w, DType dtype, int64_t row_stride, int64_t N, int64_t K,
                          uint8_t* q, float* scale, double* row_sq_error, double* row_sq_norm) {
  const size_t isz = itemsize(dtype);
  // Chunks record their first bad row; the smallest over all chunks is reported.
  std::vector<int64_t> first_bad(static_cast<size_t>(pool.num_threads()) + 1, -1);
  const int64_t grain = row_grain(K);
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(pool.num_threads(), N / grain));
  pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    const bool report = row_sq_error != nullptr;
    Tensor buf_storage = Tensor::empty({report ? 2 * K : K});
    float* buf = buf_storage.data<float>();
    float* decoded = buf + K;  // the row read back from q, for the error report
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t n_begin = N * c / chunks, n_end = N * (c + 1) / chunks;
      for (int64_t n = n_begin; n < n_end; ++n) {
        to_f32(dtype, static_cast<const char*>(w) + n * row_stride * isz, buf, K);
        float amax = 0.0f;
        bool finite = true;
        for (int64_t k = 0; k < K; ++k) {
          amax = std::max(amax, std::fabs(buf[k]));
          finite &= std::isfinite(buf[k]);
        }
        if (!finite) {
          if (first_bad[static_cast<size_t>(c)] < 0) first_bad[static_cast<size_t>(c)] = n;
          break;
        }
        const float s = amax > 0.0f ? amax / kFp8Max : 1.0f;
        for (int64_t k = 0; k < K; ++k) buf[k] /= s;
        from_f32(buf, DType::Float8_e4m3fn, q + n * K, K);
        scale[n] = s;
        if (report) {
          // buf holds w / s; the error in units of s is exact in double, then scaled.
          to_f32(DType::Float8_e4m3fn, q + n * K, decoded, K);
          double err = 0.0, ref = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            const double d = static_cast<double>(decoded[k]) - buf[k];
            err += d * d;
            ref += static_cast<double>(buf[k]) * buf[k];
          }
          row_sq_error[n] = err * s * s;
          row_sq_norm[n] = ref * s * s;
        }
      }
    }
  });
  for (int64_t bad : first_bad) {
    if (bad >= 0) return bad;
  }
  return -1;
}

void dequantize_fp8_rows(ThreadPool& pool, const LinearWeight& w, float* out) {
  const int64_t K = w.K;
  const int64_t k_blocks = ceil_div(K, kFp8ScaleBlock);
  pool.parallel_for(w.N, row_grain(K), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      float* row = out + n * K;
      to_f32(DType::Float8_e4m3fn, static_cast<const uint8_t*>(w.data) + n * w.row_stride, row, K);
      if (w.scale_layout == Fp8ScaleLayout::PerRow) {
        for (int64_t k = 0; k < K; ++k) row[k] *= w.scale[n];
      } else {
        const float* block_scale = w.scale + n / kFp8ScaleBlock * k_blocks;
        for (int64_t k = 0; k < K; ++k) row[k] *= block_scale[k / kFp8ScaleBlock];
      }
    }
  });
}

}  // namespace kiln::cpu
