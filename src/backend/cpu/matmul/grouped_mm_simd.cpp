// The small-group kernel of grouped_mm for a row-major B ([G, K, N] weights, unit stride
// along N), compiled per Highway target: C (rows x n) = A (rows x k, float32) @ B (k x n,
// float32/bfloat16/float16), for groups of a handful of rows.
//
// Register blocking: a strip of 4 vectors of output columns times up to 4 rows is 16
// accumulators; each step of k loads and widens 4 vectors of one B row once and feeds them
// to every row's FMAs, so B is streamed from memory once per 4 rows (the second pass of an
// 8-row group finds the strip, k x 4 vectors, in L2). OpenBLAS sgemm would first need B
// widened to float32 and then packs it again: on the prefill shape of bench_grouped_mm
// (row-major row, ~4 rows per expert) that took ~300 ms against ~100 ms for this loop.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/matmul/grouped_mm_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/common/codecs-inl.h"
#include "backend/cpu/matmul/grouped_mm_kernels.h"
#include "kiln/error.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr int kStripVecs = 4;
constexpr int kMaxRows = 4;

// Loads L elements of B at p widened to float32.
struct F32Elems {
  using T = float;
  static HWY_INLINE VF Load(DF df, const T* HWY_RESTRICT p) { return hn::LoadU(df, p); }
};
struct Bf16Elems {
  using T = uint16_t;
  static HWY_INLINE VF Load(DF df, const T* HWY_RESTRICT p) { return codecs::LoadBf16(df, p); }
};
struct F16Elems {
  using T = uint16_t;
  static HWY_INLINE VF Load(DF df, const T* HWY_RESTRICT p) { return codecs::LoadF16(df, p); }
};

// R rows times one strip of kStripVecs vectors of columns; `width` <= the strip's columns
// are stored.
template <class Elems, int R>
void Strip(const float* HWY_RESTRICT a, int64_t lda, const typename Elems::T* HWY_RESTRICT b, int64_t ldb, int64_t k,
           float* HWY_RESTRICT c, int64_t ldc, int64_t width) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  VF acc[R][kStripVecs];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < kStripVecs; ++v) acc[r][v] = hn::Zero(df);
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    VF bv[kStripVecs];
    for (int v = 0; v < kStripVecs; ++v) bv[v] = Elems::Load(df, b + kk * ldb + v * lanes);
    for (int r = 0; r < R; ++r) {
      const VF av = hn::Set(df, a[r * lda + kk]);
      for (int v = 0; v < kStripVecs; ++v) acc[r][v] = hn::MulAdd(av, bv[v], acc[r][v]);
    }
  }
  HWY_ALIGN float buf[kStripVecs * HWY_MAX_BYTES / sizeof(float)];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < kStripVecs; ++v) hn::Store(acc[r][v], df, buf + v * lanes);
    std::memcpy(c + r * ldc, buf, static_cast<size_t>(width) * sizeof(float));
  }
}

template <class Elems>
void RowsTimesRowMajor(const float* a, int64_t lda, int64_t rows, const void* b_data, int64_t ldb, int64_t k,
                       int64_t n, float* c, int64_t ldc) {
  using T = typename Elems::T;
  const DF df;
  const int64_t step = kStripVecs * static_cast<int64_t>(hn::Lanes(df));
  const T* b = static_cast<const T*>(b_data);
  // The last, partial strip reads a zero-padded copy so the loads never pass the row end.
  thread_local std::vector<T> padded;
  for (int64_t n0 = 0; n0 < n; n0 += step) {
    const int64_t width = std::min(step, n - n0);
    const T* strip = b + n0;
    int64_t ld = ldb;
    if (width < step) {
      padded.assign(static_cast<size_t>(k * step), T{});
      for (int64_t kk = 0; kk < k; ++kk) {
        std::memcpy(padded.data() + kk * step, b + kk * ldb + n0, static_cast<size_t>(width) * sizeof(T));
      }
      strip = padded.data();
      ld = step;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
      const float* ar = a + r0 * lda;
      float* cr = c + r0 * ldc + n0;
      switch (std::min<int64_t>(kMaxRows, rows - r0)) {
        case 4: Strip<Elems, 4>(ar, lda, strip, ld, k, cr, ldc, width); break;
        case 3: Strip<Elems, 3>(ar, lda, strip, ld, k, cr, ldc, width); break;
        case 2: Strip<Elems, 2>(ar, lda, strip, ld, k, cr, ldc, width); break;
        default: Strip<Elems, 1>(ar, lda, strip, ld, k, cr, ldc, width); break;
      }
    }
  }
}

}  // namespace

void SmallRowsTimesRowMajor(const float* a, int64_t lda, int64_t rows, const void* b, DType b_dtype, int64_t ldb,
                            int64_t k, int64_t n, float* c, int64_t ldc) {
  switch (b_dtype) {
    case DType::Float32: return RowsTimesRowMajor<F32Elems>(a, lda, rows, b, ldb, k, n, c, ldc);
    case DType::BFloat16: return RowsTimesRowMajor<Bf16Elems>(a, lda, rows, b, ldb, k, n, c, ldc);
    case DType::Float16: return RowsTimesRowMajor<F16Elems>(a, lda, rows, b, ldb, k, n, c, ldc);
    default: fail(ErrorKind::Type, "grouped_mm", "no small-group kernel for {}", dtype_name(b_dtype));
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(SmallRowsTimesRowMajor);

int64_t grouped_mm_simd_targets() { return HWY_TARGETS; }

void small_rows_times_rowmajor(const float* a, int64_t lda, int64_t rows, const void* b, DType b_dtype, int64_t ldb,
                               int64_t k, int64_t n, float* c, int64_t ldc) {
  HWY_DYNAMIC_DISPATCH(SmallRowsTimesRowMajor)(a, lda, rows, b, b_dtype, ldb, k, n, c, ldc);
}

}  // namespace kiln::cpu
#endif
