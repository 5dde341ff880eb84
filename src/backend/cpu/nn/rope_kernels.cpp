// Rotary position embedding kernels (see rope_kernels.h): the per-token rotation,
// compiled once per Highway target, and the driver that runs it over the tokens.
//
// Rotate-half pairs (i, i + half) are two plain vector loads; interleaved pairs
// (2i, 2i + 1) are split into even and odd lanes with LoadInterleaved2 and merged back
// with StoreInterleaved2. Both compute a*cos - b*sin and b*cos + a*sin with one FMA
// each. Tails go through zero-padded buffers, so every pair sees the same arithmetic.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/nn/rope_kernels.cpp"
#include "backend/cpu/nn/rope_kernels.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
HWY_INLINE void Rotate(D, hn::Vec<D> a, hn::Vec<D> b, hn::Vec<D> c, hn::Vec<D> s, hn::Vec<D>& ya, hn::Vec<D>& yb) {
  ya = hn::MulSub(a, c, hn::Mul(b, s));
  yb = hn::MulAdd(a, s, hn::Mul(b, c));
}

// One head, rotate-half pairs.
template <class T>
HWY_INLINE void RotateHalfHead(const T* x, const T* cos, const T* sin, T* y, size_t half) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= half; i += N) {
    hn::Vec<decltype(d)> ya, yb;
    Rotate(d, hn::LoadU(d, x + i), hn::LoadU(d, x + half + i), hn::LoadU(d, cos + i), hn::LoadU(d, sin + i), ya, yb);
    hn::StoreU(ya, d, y + i);
    hn::StoreU(yb, d, y + half + i);
  }
  if (i < half) {
    const size_t m = half - i;
    HWY_ALIGN T buf[4][HWY_MAX_BYTES / sizeof(T)] = {};
    std::memcpy(buf[0], x + i, m * sizeof(T));
    std::memcpy(buf[1], x + half + i, m * sizeof(T));
    std::memcpy(buf[2], cos + i, m * sizeof(T));
    std::memcpy(buf[3], sin + i, m * sizeof(T));
    hn::Vec<decltype(d)> ya, yb;
    Rotate(d, hn::Load(d, buf[0]), hn::Load(d, buf[1]), hn::Load(d, buf[2]), hn::Load(d, buf[3]), ya, yb);
    hn::Store(ya, d, buf[0]);
    hn::Store(yb, d, buf[1]);
    std::memcpy(y + i, buf[0], m * sizeof(T));
    std::memcpy(y + half + i, buf[1], m * sizeof(T));
  }
}

// One head, interleaved pairs.
template <class T>
HWY_INLINE void RotateInterleavedHead(const T* x, const T* cos, const T* sin, T* y, size_t half) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= half; i += N) {
    hn::Vec<decltype(d)> a, b, ya, yb;
    hn::LoadInterleaved2(d, x + 2 * i, a, b);
    Rotate(d, a, b, hn::LoadU(d, cos + i), hn::LoadU(d, sin + i), ya, yb);
    hn::StoreInterleaved2(ya, yb, d, y + 2 * i);
  }
  if (i < half) {
    const size_t m = half - i;
    HWY_ALIGN T pairs[2 * HWY_MAX_BYTES / sizeof(T)] = {};
    HWY_ALIGN T cs[2][HWY_MAX_BYTES / sizeof(T)] = {};
    std::memcpy(pairs, x + 2 * i, 2 * m * sizeof(T));
    std::memcpy(cs[0], cos + i, m * sizeof(T));
    std::memcpy(cs[1], sin + i, m * sizeof(T));
    hn::Vec<decltype(d)> a, b, ya, yb;
    hn::LoadInterleaved2(d, pairs, a, b);
    Rotate(d, a, b, hn::Load(d, cs[0]), hn::Load(d, cs[1]), ya, yb);
    hn::StoreInterleaved2(ya, yb, d, pairs);
    std::memcpy(y + 2 * i, pairs, 2 * m * sizeof(T));
  }
}

template <class T>
void RopeRotateTokenImpl(const T* x, const T* cos, const T* sin, T* y, int64_t heads, int64_t head_dim,
                         int64_t rotary_dim, bool interleaved) {
  const size_t half = static_cast<size_t>(rotary_dim / 2), rest = static_cast<size_t>(head_dim - rotary_dim);
  for (int64_t h = 0; h < heads; ++h) {
    const T* xh = x + h * head_dim;
    T* yh = y + h * head_dim;
    if (interleaved) {
      RotateInterleavedHead(xh, cos, sin, yh, half);
    } else {
      RotateHalfHead(xh, cos, sin, yh, half);
    }
    if (rest > 0 && yh != xh) std::memcpy(yh + rotary_dim, xh + rotary_dim, rest * sizeof(T));
  }
}

void RopeRotateTokenF32(const float* x, const float* cos, const float* sin, float* y, int64_t heads, int64_t head_dim,
                        int64_t rotary_dim, bool interleaved) {
  RopeRotateTokenImpl(x, cos, sin, y, heads, head_dim, rotary_dim, interleaved);
}
void RopeRotateTokenF64(const double* x, const double* cos, const double* sin, double* y, int64_t heads,
                        int64_t head_dim, int64_t rotary_dim, bool interleaved) {
  RopeRotateTokenImpl(x, cos, sin, y, heads, head_dim, rotary_dim, interleaved);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/cast/cast.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

HWY_EXPORT(RopeRotateTokenF32);
HWY_EXPORT(RopeRotateTokenF64);

void rope_rotate_token(const float* x, const float* cos, const float* sin, float* y, int64_t heads, int64_t head_dim,
                       int64_t rotary_dim, bool interleaved) {
  HWY_DYNAMIC_DISPATCH(RopeRotateTokenF32)(x, cos, sin, y, heads, head_dim, rotary_dim, interleaved);
}
void rope_rotate_token(const double* x, const double* cos, const double* sin, double* y, int64_t heads,
                       int64_t head_dim, int64_t rotary_dim, bool interleaved) {
  HWY_DYNAMIC_DISPATCH(RopeRotateTokenF64)(x, cos, sin, y, heads, head_dim, rotary_dim, interleaved);
}

int64_t rope_simd_targets() { return HWY_TARGETS; }

namespace {

// Least elements a thread is given.
constexpr int64_t kRopeGrainElements = 16384;

template <class T>
void rope_tokens(const RopeProblem& p, ThreadPool& pool) {
  const int64_t row = p.heads * p.head_dim, half = p.rotary_dim / 2;
  const size_t item = itemsize(p.dtype);
  const T* cos = static_cast<const T*>(p.cos);
  const T* sin = static_cast<const T*>(p.sin);
  const bool narrow = p.dtype != DType::Float32 && p.dtype != DType::Float64;
  const int64_t chunks = std::clamp<int64_t>(
      p.tokens / std::max<int64_t>(1, kRopeGrainElements / std::max<int64_t>(row, 1)), 1, pool.num_threads());
  // Narrow tokens are widened into float32 scratch, one row per chunk.
  Tensor scratch = narrow ? Tensor::empty({chunks, row}, DType::Float32) : Tensor();
  pool.parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      for (int64_t t = p.tokens * c / chunks; t < p.tokens * (c + 1) / chunks; ++t) {
        const char* in = static_cast<const char*>(p.x) + t * row * item;
        char* out = static_cast<char*>(p.out) + t * row * item;
        const int64_t table_row = t % p.table_rows;
        if constexpr (std::is_same_v<T, float>) {
          if (narrow) {
            float* buf = scratch.data<float>() + c * row;
            to_f32(p.dtype, in, buf, row);
            rope_rotate_token(buf, cos + table_row * half, sin + table_row * half, buf, p.heads, p.head_dim,
                              p.rotary_dim, p.interleaved);
            from_f32(buf, p.dtype, out, row);
            continue;
          }
        }
        rope_rotate_token(reinterpret_cast<const T*>(in), cos + table_row * half, sin + table_row * half,
                          reinterpret_cast<T*>(out), p.heads, p.head_dim, p.rotary_dim, p.interleaved);
      }
    }
  });
}

}  // namespace

void rope_cpu(const RopeProblem& p, ThreadPool& pool) {
  if (p.tokens == 0 || p.heads == 0 || p.head_dim == 0) return;
  if (p.dtype == DType::Float64) {
    rope_tokens<double>(p, pool);
  } else {
    rope_tokens<float>(p, pool);
  }
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
