// masked_fill and masked_select: byte moves selected by a bool mask, one
// instantiation per element size.
#include <cstring>

#include "backend/cpu/index/index_kernels.h"
#include "backend/cpu/index/index_loops.h"
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
  OrderedChunks chunks(pool, numel, kMaskGrain);
  const int64_t selected = chunks.count([&](int64_t begin, int64_t end) {
    int64_t count = 0;
    geo.for_each_row(begin, end, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
      for (int64_t k = 0; k < n; ++k) count += p[1][k * s[1]] != 0;
    });
    return count;
  });
  Tensor out = Tensor::empty({selected}, input.dtype());
  char* out_base = static_cast<char*>(out.data_ptr());
  chunks.write([&](int64_t begin, int64_t end, int64_t first) {
    char* dst = out_base + first * int64_t{kElem};
    geo.for_each_row(begin, end, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
      for (int64_t k = 0; k < n; ++k) {
        if (p[1][k * s[1]] == 0) continue;
        std::memcpy(dst, p[0] + k * s[0], kElem);
        dst += kElem;
      }
    });
  });
  return out;
}

}  // namespace

void masked_fill(ThreadPool& pool, const Tensor& out, const Tensor& input, const Tensor& mask, const void* value) {
  with_element_size(out.element_size(), "masked_fill",
                    [&](auto elem) { masked_fill_impl<decltype(elem)::value>(pool, out, input, mask, value); });
}

Tensor masked_select(ThreadPool& pool, const Tensor& input, const Tensor& mask) {
  return with_element_size(input.element_size(), "masked_select",
                           [&](auto elem) { return masked_select_impl<decltype(elem)::value>(pool, input, mask); });
}

}  // namespace kiln::cpu
