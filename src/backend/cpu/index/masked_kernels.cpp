// masked_fill and masked_select: byte moves selected by a bool mask, one
// instantiation per element size.
#include <algorithm>
#include <cstring>

#include "backend/cpu/index/index_kernels.h"
#include "backend/cpu/common/loops.h"
#include "kiln/error.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kMaskGrain = 1 << 15;  // elements per thread, at least

template <size_t kElem>
void masked_fill_impl(ThreadPool& pool, const Tensor& out, const Tensor& input, const Tensor& mask,
                      const void* value) {
  LoopGeometry<3> geo({&out, &input, &mask}, out.sizes());
  if (geo.numel == 0) return;
  const char* fill = static_cast<const char*>(value);
  pool.parallel_for(geo.numel, kMaskGrain, [&](int64_t begin, int64_t end) {
    geo.for_each_row(begin, end, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
      for (int64_t k = 0; k < n; ++k) {
        char* dst = p[0] + k * s[0];
        const char* from = p[2][k * s[2]] != 0 ? fill : p[1] + k * s[1];
        // In place (out is input) an unmasked element is already where it belongs.
        if (from != dst) std::memcpy(dst, from, kElem);
      }
    });
  });
}

template <size_t kElem>
Tensor masked_select_impl(ThreadPool& pool, const Tensor& input, const Tensor& mask) {
  LoopGeometry<2> geo({&input, &mask}, input.sizes());
  const int64_t numel = shape_numel(input.sizes());
  if (numel == 0) return Tensor::empty({0}, input.dtype());
  // Two passes over fixed chunks: count the selected elements of each chunk, then
  // write each chunk's elements at its prefix-sum offset, keeping row-major order.
  const int64_t chunks = std::clamp<int64_t>(numel / kMaskGrain, 1, int64_t{pool.num_threads()} * 4);
  auto chunk_begin = [&](int64_t c) { return numel / chunks * c + std::min(c, numel % chunks); };
  std::vector<int64_t> offsets(static_cast<size_t>(chunks) + 1, 0);
  pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      int64_t count = 0;
      geo.for_each_row(chunk_begin(c), chunk_begin(c + 1),
                       [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
                         for (int64_t k = 0; k < n; ++k) count += p[1][k * s[1]] != 0;
                       });
      offsets[static_cast<size_t>(c) + 1] = count;
    }
  });
  for (int64_t c = 0; c < chunks; ++c) offsets[static_cast<size_t>(c) + 1] += offsets[static_cast<size_t>(c)];
  Tensor out = Tensor::empty({offsets.back()}, input.dtype());
  char* out_base = static_cast<char*>(out.data_ptr());
  pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      char* dst = out_base + offsets[static_cast<size_t>(c)] * int64_t{kElem};
      geo.for_each_row(chunk_begin(c), chunk_begin(c + 1),
                       [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
                         for (int64_t k = 0; k < n; ++k) {
                           if (p[1][k * s[1]] == 0) continue;
                           std::memcpy(dst, p[0] + k * s[0], kElem);
                           dst += kElem;
                         }
                       });
    }
  });
  return out;
}

}  // namespace

void masked_fill(ThreadPool& pool, const Tensor& out, const Tensor& input, const Tensor& mask, const void* value) {
  switch (out.element_size()) {
    case 1: return masked_fill_impl<1>(pool, out, input, mask, value);
    case 2: return masked_fill_impl<2>(pool, out, input, mask, value);
    case 4: return masked_fill_impl<4>(pool, out, input, mask, value);
    case 8: return masked_fill_impl<8>(pool, out, input, mask, value);
    case 16: return masked_fill_impl<16>(pool, out, input, mask, value);
  }
  fail(ErrorKind::Type, "masked_fill", "unsupported element size {}", out.element_size());
}

Tensor masked_select(ThreadPool& pool, const Tensor& input, const Tensor& mask) {
  switch (input.element_size()) {
    case 1: return masked_select_impl<1>(pool, input, mask);
    case 2: return masked_select_impl<2>(pool, input, mask);
    case 4: return masked_select_impl<4>(pool, input, mask);
    case 8: return masked_select_impl<8>(pool, input, mask);
    case 16: return masked_select_impl<16>(pool, input, mask);
  }
  fail(ErrorKind::Type, "masked_select", "unsupported element size {}", input.element_size());
}

}  // namespace kiln::cpu
