// scatter_add (and index_add, which the front end expresses as a scatter_add with a
// broadcast index): self[..., index[p], ...] += alpha * src[p].
//
// Deterministic without atomics: the positions outside the scattered dim are split
// across threads, and a position's whole column of index (all j along dim) is handled
// by one thread in order j = 0, 1, ... Every element of self can only be reached from
// one such position, so each one sums its contributions in index order on one thread,
// which is also PyTorch's CPU order, and results do not depend on the thread count.
#include <cstring>

#include "backend/cpu/common/byte_stride.h"
#include "backend/cpu/index/accumulate.h"
#include "backend/cpu/index/index_kernels.h"
#include "backend/cpu/common/loops.h"
#include "kiln/error.h"
#include "kiln/scalar_types.h"

namespace kiln::cpu {

namespace {

// Minimum (position, j) pairs per thread.
constexpr int64_t kScatterGrain = 1 << 15;

// A tensor header over `t`'s storage with the given geometry, without as_strided's
// bounds check (the walks below never read outside what the front end validated).
Tensor view_of(const Tensor& t, Shape sizes, Shape strides) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = t.storage_offset();
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

template <typename T, typename Index>
void scatter_add_impl(ThreadPool& pool, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const Scalar& alpha_scalar) {
  using Acc = Accumulate<T>;
  const typename Acc::Alpha alpha = Acc::alpha(alpha_scalar);
  constexpr int64_t kElem = sizeof(T);
  // Positions outside `dim` (index's shape with dim removed), walked by all three
  // tensors; the front end gives them at least one dim.
  if (self.numel() == 0) {
    // The front end keeps index within self off `dim`, so a non-empty index over an empty
    // self means self has no row at `dim`: its first entry is out of bounds. (An empty
    // self may carry any strides, which the walk below must not scale.)
    if (index.numel() == 0) return;
    Index v;
    std::memcpy(&v, index.data_ptr(), sizeof(Index));
    fail(ErrorKind::Index, "scatter_add", "index {} is out of bounds for dimension {} with size {}",
         static_cast<int64_t>(v), dim, self.size(dim));
  }
  Shape other = index.sizes(), self_st = self.strides(), index_st = index.strides(), src_st = src.strides();
  const int64_t steps = other[dim];
  const int64_t self_dim_size = self.size(dim);
  const int64_t self_dim_stride = byte_stride(self, dim, kElem);
  const int64_t index_dim_stride = byte_stride(index, dim, int64_t{sizeof(Index)});
  const int64_t src_dim_stride = byte_stride(src, dim, kElem);
  other.erase(other.begin() + dim);
  self_st.erase(self_st.begin() + dim);
  index_st.erase(index_st.begin() + dim);
  src_st.erase(src_st.begin() + dim);
  const Tensor self_walk = view_of(self, other, self_st);
  const Tensor index_walk = view_of(index, other, index_st);
  const Tensor src_walk = view_of(src, other, src_st);
  LoopGeometry<3> geo({&self_walk, &index_walk, &src_walk}, other);
  if (geo.numel == 0 || steps == 0) return;

  const int64_t grain = std::max<int64_t>(1, kScatterGrain / steps);
  pool.parallel_for(geo.numel, grain, [&](int64_t begin, int64_t end) {
    geo.for_each_row(begin, end, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
      for (int64_t j = 0; j < steps; ++j) {
        const char* index_row = p[1] + j * index_dim_stride;
        const char* src_row = p[2] + j * src_dim_stride;
        for (int64_t k = 0; k < n; ++k) {
          Index v;
          std::memcpy(&v, index_row + k * s[1], sizeof(Index));
          if (v < 0 || v >= self_dim_size) [[unlikely]] {
            fail(ErrorKind::Index, "scatter_add", "index {} is out of bounds for dimension {} with size {}",
                 static_cast<int64_t>(v), dim, self_dim_size);
          }
          char* d = p[0] + k * s[0] + static_cast<int64_t>(v) * self_dim_stride;
          T acc, x;
          std::memcpy(&acc, d, kElem);
          std::memcpy(&x, src_row + k * s[2], kElem);
          acc = Acc::add(acc, x, alpha);
          std::memcpy(d, &acc, kElem);
        }
      }
    });
  });
}

using ScatterFn = void (*)(ThreadPool&, const Tensor&, int64_t, const Tensor&, const Tensor&, const Scalar&);

template <typename Index>
ScatterFn scatter_fn(DType dt) {
  return visit_addable_dtype<ScatterFn>(dt, nullptr, [](auto tag) -> ScatterFn {
    return &scatter_add_impl<typename decltype(tag)::type, Index>;
  });
}

}  // namespace

void scatter_add(ThreadPool& pool, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                 const Scalar& alpha) {
  check_addable_dtype(self.dtype(), "scatter_add");
  ScatterFn fn = index.dtype() == DType::Int64 ? scatter_fn<int64_t>(self.dtype()) : scatter_fn<int32_t>(self.dtype());
  fn(pool, self, dim, index, src, alpha);
}

}  // namespace kiln::cpu
