// Byte-moving helpers shared by the gather/scatter-style kernels (internal): a pair
// of coalesced strided geometries, and a block copy templated on element size so that
// every dtype of one width shares one instantiation and contiguous runs use memcpy.
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/cpu/common/loops.h"

namespace kiln::cpu {

// Dims walked together by a destination and a source, outermost first, size-1 dims
// dropped and neighbours merged when both strides allow. Strides in bytes.
struct PairDims {
  int nd = 0;
  int64_t numel = 1;
  int64_t size[kMaxLoopDims];
  int64_t dst[kMaxLoopDims];
  int64_t src[kMaxLoopDims];

  // Appends the next (inner) dim.
  void push(int64_t n, int64_t dst_stride, int64_t src_stride) {
    numel *= n;
    if (n == 1) return;
    if (nd > 0 && dst[nd - 1] == dst_stride * n && src[nd - 1] == src_stride * n) {
      size[nd - 1] *= n;
      dst[nd - 1] = dst_stride;
      src[nd - 1] = src_stride;
      return;
    }
    size[nd] = n;
    dst[nd] = dst_stride;
    src[nd] = src_stride;
    ++nd;
  }

  void unravel(int64_t flat, int64_t* index) const {
    for (int d = nd - 1; d >= 0; --d) {
      index[d] = flat % size[d];
      flat /= size[d];
    }
  }
  // Steps a multi-index to the next position in row-major order.
  void next(int64_t* index) const {
    for (int d = nd - 1; d >= 0; --d) {
      if (++index[d] < size[d]) return;
      index[d] = 0;
    }
  }
  int64_t offset_dst(const int64_t* index) const {
    int64_t o = 0;
    for (int d = 0; d < nd; ++d) o += index[d] * dst[d];
    return o;
  }
  int64_t offset_src(const int64_t* index) const {
    int64_t o = 0;
    for (int d = 0; d < nd; ++d) o += index[d] * src[d];
    return o;
  }
};

// Copies the block described by `dims` (numel > 0) from src to dst, kElem bytes an element.
template <size_t kElem>
inline void copy_block(char* dst, const char* src, const PairDims& dims) {
  if (dims.nd == 0) {
    std::memcpy(dst, src, kElem);
    return;
  }
  const int last = dims.nd - 1;
  const int64_t run = dims.size[last];
  const int64_t ds = dims.dst[last], ss = dims.src[last];
  const bool dense = ds == int64_t{kElem} && ss == int64_t{kElem};
  if (dims.nd == 1 && dense) {
    std::memcpy(dst, src, static_cast<size_t>(run) * kElem);
    return;
  }
  int64_t index[kMaxLoopDims] = {};
  const int64_t outer_count = dims.numel / run;
  for (int64_t r = 0; r < outer_count; ++r) {
    char* d = dst + dims.offset_dst(index);
    const char* s = src + dims.offset_src(index);
    if (dense) {
      std::memcpy(d, s, static_cast<size_t>(run) * kElem);
    } else {
      for (int64_t i = 0; i < run; ++i) std::memcpy(d + i * ds, s + i * ss, kElem);
    }
    // Advance the dims outside the innermost one.
    for (int k = last - 1; k >= 0; --k) {
      if (++index[k] < dims.size[k]) break;
      index[k] = 0;
    }
  }
}

}  // namespace kiln::cpu
