// Constant padding in one pass over the output (backend/pad.h): each output row (the
// innermost dim) is either all fill, or fill | a run of the input | fill. Rows are split
// across the pool; a thread steps its row index instead of dividing per row.
#include <algorithm>
#include <cstring>

#include "backend/cpu/pad/pad_kernels.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

namespace {

// Element types by width, so that every dtype of one size shares one instantiation.
template <size_t N>
struct Bytes {
  unsigned char b[N];
};

template <typename T>
void fill_run(T* dst, int64_t n, T value) {
  std::fill(dst, dst + n, value);
}

template <typename T>
void copy_run(T* dst, const T* src, int64_t n, int64_t src_stride) {
  if (src_stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i * src_stride];
}

template <typename T>
void constant_pad_typed(ThreadPool& pool, const backend::ConstantPadProblem& p) {
  const int inner = p.ndim - 1;
  const int64_t width = p.out_sizes[inner];
  int64_t rows = 1;
  bool interior = true;
  for (int d = 0; d < p.ndim; ++d) interior = interior && p.length[d] > 0;
  for (int d = 0; d < inner; ++d) rows *= p.out_sizes[d];
  if (rows == 0 || width == 0) return;
  T value;
  std::memcpy(&value, p.fill, sizeof(T));
  T* out = static_cast<T*>(p.out);
  const T* in = static_cast<const T*>(p.in);
  const int64_t lo = p.begin[inner], len = p.length[inner];
  const int64_t hi = lo + len;
  // About 64 KiB of output per task at least: the loop is bound by memory traffic.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / static_cast<int64_t>(sizeof(T)) / width);
  pool.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    int64_t index[backend::kMaxPadDims] = {};
    for (int64_t rest = begin, d = inner - 1; d >= 0; --d) {
      index[d] = rest % p.out_sizes[d];
      rest /= p.out_sizes[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      T* dst = out + row * width;
      bool inside = interior;
      int64_t src_offset = 0;
      for (int d = 0; d < inner && inside; ++d) {
        const int64_t j = index[d] - p.begin[d];
        inside = j >= 0 && j < p.length[d];
        // Only a position inside the input is scaled: a one-element dim may carry any
        // stride (2^62 times a fill row's index overflows).
        if (inside) src_offset += j * p.in_strides[d];
      }
      if (!inside) {
        fill_run(dst, width, value);
      } else {
        fill_run(dst, lo, value);
        copy_run(dst + lo, in + src_offset, len, p.in_strides[inner]);
        fill_run(dst + hi, width - hi, value);
      }
      for (int d = inner - 1; d >= 0; --d) {
        if (++index[d] < p.out_sizes[d]) break;
        index[d] = 0;
      }
    }
  });
}

}  // namespace

void constant_pad(ThreadPool& pool, const backend::ConstantPadProblem& p) {
  switch (p.itemsize) {
    case 1: return constant_pad_typed<uint8_t>(pool, p);
    case 2: return constant_pad_typed<uint16_t>(pool, p);
    case 4: return constant_pad_typed<uint32_t>(pool, p);
    case 8: return constant_pad_typed<uint64_t>(pool, p);
    case 16: return constant_pad_typed<Bytes<16>>(pool, p);
    default: KILN_CHECK(false, "pad", "no constant-pad kernel for {}-byte elements", p.itemsize);
  }
}

}  // namespace kiln::cpu
