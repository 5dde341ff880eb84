// Row and element gathers: index_select (and embedding, which is index_select on dim 0)
// and gather. Both only move bytes, so one instantiation per element size serves every
// dtype with the same width, and the dtype switch happens once per call.
#include <cstring>

#include "backend/cpu/common/byte_stride.h"
#include "backend/cpu/common/element_copy.h"
#include "backend/cpu/index/index_kernels.h"
#include "backend/cpu/index/index_loops.h"
#include "backend/cpu/common/loops.h"
#include "kiln/error.h"

namespace kiln::cpu {

namespace {

// Below this many bytes a thread is not worth waking: the copy is faster than the hand-off.
constexpr int64_t kCopyGrainBytes = 1 << 16;

template <size_t kElem>
void index_select_impl(ThreadPool& pool, const Tensor& out, const Tensor& input, int64_t dim,
                       const std::vector<int64_t>& rows) {
  // out and input differ only at `dim`, so the dims before it (outer) and after it
  // (inner: one "row") coalesce pairwise; the dim itself is walked by index.
  if (out.numel() == 0) return;
  PairDims outer, inner;
  for (int64_t d = 0; d < dim; ++d) {
    outer.push(out.size(d), byte_stride(out, d, kElem), byte_stride(input, d, kElem));
  }
  for (int64_t d = dim + 1; d < out.dim(); ++d) {
    inner.push(out.size(d), byte_stride(out, d, kElem), byte_stride(input, d, kElem));
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t tasks = outer.numel * n;
  const int64_t out_dim_stride = byte_stride(out, dim, kElem);
  const int64_t in_dim_stride = byte_stride(input, dim, kElem);
  char* const out_base = static_cast<char*>(out.data_ptr());
  const char* const in_base = static_cast<const char*>(input.data_ptr());
  const int64_t* const row_ids = rows.data();
  const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / (inner.numel * int64_t{kElem}));

  pool.parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    // Task t copies row j = t % n of outer position t / n.
    int64_t outer_index[kMaxLoopDims];
    int64_t j = begin % n;
    outer.unravel(begin / n, outer_index);
    char* out_row = out_base + outer.offset_dst(outer_index);
    const char* in_row = in_base + outer.offset_src(outer_index);
    for (int64_t t = begin; t < end; ++t) {
      copy_block<kElem>(out_row + j * out_dim_stride, in_row + row_ids[j] * in_dim_stride, inner);
      if (++j == n && t + 1 < end) {
        j = 0;
        outer.next(outer_index);
        out_row = out_base + outer.offset_dst(outer_index);
        in_row = in_base + outer.offset_src(outer_index);
      }
    }
  });
}

template <size_t kElem, typename Index>
void gather_impl(ThreadPool& pool, const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index) {
  // The front end gives input and index at least one dim.
  const int64_t dim_size = input.size(dim);
  if (input.numel() == 0 && index.numel() > 0) {
    // index stays within input off `dim`, so input has no row at `dim`: the first entry is
    // out of bounds. (An empty input may carry any strides, which the walk must not scale.)
    Index v;
    std::memcpy(&v, index.data_ptr(), sizeof(Index));
    fail(ErrorKind::Index, "gather", "index {} is out of bounds for dimension {} with size {}",
         static_cast<int64_t>(v), dim, dim_size);
  }
  const int64_t dim_stride = byte_stride(input, dim, kElem);
  // The input walked over index's shape with the gathered dim's stride zeroed: at
  // position (i, j, k) it points at input[i][0][k], and the kernel adds index * stride.
  // Built directly (not with as_strided) because for an empty input the walk may look
  // out of bounds even though no element is ever read.
  auto walk_impl = std::make_shared<TensorImpl>();
  walk_impl->storage = input.storage();
  walk_impl->sizes = index.sizes();
  walk_impl->strides = input.strides();
  walk_impl->strides[dim] = 0;
  walk_impl->offset = input.storage_offset();
  walk_impl->dtype = input.dtype();
  const Tensor walk(std::move(walk_impl));

  LoopGeometry<3> geo({&out, &index, &walk}, index.sizes());
  if (geo.numel == 0) return;
  const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / int64_t{kElem});
  pool.parallel_for(geo.numel, grain, [&](int64_t begin, int64_t end) {
    geo.for_each_row(begin, end, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
      for (int64_t k = 0; k < n; ++k) {
        Index v;
        std::memcpy(&v, p[1] + k * s[1], sizeof(Index));
        if (v < 0 || v >= dim_size) [[unlikely]] {
          fail(ErrorKind::Index, "gather", "index {} is out of bounds for dimension {} with size {}",
               static_cast<int64_t>(v), dim, dim_size);
        }
        std::memcpy(p[0] + k * s[0], p[2] + k * s[2] + static_cast<int64_t>(v) * dim_stride, kElem);
      }
    });
  });
}

template <typename Index>
void gather_by_size(ThreadPool& pool, const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index) {
  with_element_size(input.element_size(), "gather",
                    [&](auto elem) { gather_impl<decltype(elem)::value, Index>(pool, out, input, dim, index); });
}

}  // namespace

std::vector<int64_t> index_values(const Tensor& index) {
  const int64_t n = index.numel();
  const int64_t stride = index.dim() == 0 ? 0 : index.stride(0);
  std::vector<int64_t> rows(static_cast<size_t>(n));
  if (index.dtype() == DType::Int64) {
    const int64_t* p = index.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) rows[i] = p[i * stride];
  } else {
    const int32_t* p = index.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) rows[i] = p[i * stride];
  }
  return rows;
}

void index_select_rows(ThreadPool& pool, const Tensor& out, const Tensor& input, int64_t dim,
                       const std::vector<int64_t>& rows) {
  with_element_size(input.element_size(), "index_select",
                    [&](auto elem) { index_select_impl<decltype(elem)::value>(pool, out, input, dim, rows); });
}

void gather(ThreadPool& pool, const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index) {
  if (index.dtype() == DType::Int64) {
    gather_by_size<int64_t>(pool, out, input, dim, index);
  } else {
    gather_by_size<int32_t>(pool, out, input, dim, index);
  }
}

}  // namespace kiln::cpu
