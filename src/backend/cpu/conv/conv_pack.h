// Packing for the GEMM convolution kernels (internal to src/backend/cpu/conv).
//
// Each GEMM reads a tile of "windows": for grid positions q (a flattened 3-D grid) and
// kernel taps l, the source value at position q * step + offset(l) of a 3-D plane,
// zero outside it. The forward pass and the weight gradient walk the output grid with
// step = stride and offset = tap * dilation - padding (im2col); the input gradient walks
// the input positions of one stride phase with step 1 (see conv_gemm.cpp).
//   planar (contiguous layout): one row of the tile per (channel, tap), positions along
//     the row: runs of the grid's last dim copy a row segment of the plane;
//   pixel (channels-last layout): one row per position, (tap, channel) along it: each
//     tap copies a run of channels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln::cpu::conv {

struct Dims3 {
  int64_t d[3] = {1, 1, 1};
  int64_t numel() const { return d[0] * d[1] * d[2]; }
};

// One kernel tap: its flat index in the kernel (kd, kh, kw order) and its source offset.
struct Tap {
  int64_t index;
  int64_t off[3];
};

// The sub-range [lo, hi) of grid positions q in [q0, q0 + len) whose source position
// q * step + off falls in [0, size).
inline void valid_range(int64_t q0, int64_t len, int64_t step, int64_t off, int64_t size, int64_t* lo,
                        int64_t* hi) {
  int64_t first = off >= 0 ? 0 : (-off + step - 1) / step;               // q * step + off >= 0
  int64_t last = size - off <= 0 ? 0 : (size - off + step - 1) / step;   // q * step + off < size
  *lo = std::clamp(first, q0, q0 + len);
  *hi = std::clamp(last, *lo, q0 + len);
}

// dst[0..qn) = plane sampled at grid positions q0..q0+qn for one tap.
template <typename T>
void pack_planar_row(T* dst, const T* plane, const Dims3& src, const Dims3& grid, const int64_t step[3],
                     const int64_t off[3], int64_t q0, int64_t qn) {
  const int64_t gw = grid.d[2], gh = grid.d[1];
  int64_t qw = q0 % gw, qh = (q0 / gw) % gh, qd = q0 / (gw * gh);
  while (qn > 0) {
    const int64_t len = std::min(qn, gw - qw);
    const int64_t id = qd * step[0] + off[0], ih = qh * step[1] + off[1];
    if (id < 0 || id >= src.d[0] || ih < 0 || ih >= src.d[1]) {
      std::fill(dst, dst + len, T(0));
    } else {
      const T* row = plane + (id * src.d[1] + ih) * src.d[2];
      int64_t lo, hi;
      valid_range(qw, len, step[2], off[2], src.d[2], &lo, &hi);
      std::fill(dst, dst + (lo - qw), T(0));
      if (step[2] == 1) {
        std::memcpy(dst + (lo - qw), row + lo + off[2], static_cast<size_t>(hi - lo) * sizeof(T));
      } else {
        for (int64_t q = lo; q < hi; ++q) dst[q - qw] = row[q * step[2] + off[2]];
      }
      std::fill(dst + (hi - qw), dst + len, T(0));
    }
    dst += len;
    qn -= len;
    qw = 0;
    if (++qh == gh) {
      qh = 0;
      ++qd;
    }
  }
}

// dst[q][l * run + c] = base[pixel(q * step + taps[l].off) * pixel_stride + c] for c < run,
// zero where the pixel falls outside src; rows of taps.size() * run values.
template <typename T>
void pack_pixel_rows(T* dst, const T* base, int64_t pixel_stride, int64_t run, const Dims3& src, const Dims3& grid,
                     const int64_t step[3], const std::vector<Tap>& taps, int64_t q0, int64_t qn) {
  const int64_t gw = grid.d[2], gh = grid.d[1];
  int64_t qw = q0 % gw, qh = (q0 / gw) % gh, qd = q0 / (gw * gh);
  const size_t bytes = static_cast<size_t>(run) * sizeof(T);
  for (int64_t i = 0; i < qn; ++i) {
    const int64_t bd = qd * step[0], bh = qh * step[1], bw = qw * step[2];
    for (const Tap& t : taps) {
      const int64_t id = bd + t.off[0], ih = bh + t.off[1], iw = bw + t.off[2];
      if (id < 0 || id >= src.d[0] || ih < 0 || ih >= src.d[1] || iw < 0 || iw >= src.d[2]) {
        std::memset(dst, 0, bytes);
      } else {
        std::memcpy(dst, base + ((id * src.d[1] + ih) * src.d[2] + iw) * pixel_stride, bytes);
      }
      dst += run;
    }
    if (++qw == gw) {
      qw = 0;
      if (++qh == gh) {
        qh = 0;
        ++qd;
      }
    }
  }
}

}  // namespace kiln::cpu::conv
