// Advanced indexing kernels: nonzero, index (gather through index tensors) and
// index_put (write or accumulate through them), in PyTorch's restrided form
// (backend/index.h: AdvancedIndexGeometry).
//
// The number of index tensors is only known at run time, so these walk their operands
// with a plain coordinate counter instead of the fixed-arity LoopGeometry. Indexing is
// not on a decode hot path; the per-element cost is one bounds check per index tensor.
#include <algorithm>
#include <array>
#include <cstring>

#include "backend/cpu/common/byte_stride.h"
#include "backend/cpu/index/accumulate.h"
#include "backend/cpu/index/index_kernels.h"
#include "backend/cpu/index/index_loops.h"
#include "backend/elementwise.h"
#include "kiln/error.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kAdvancedGrain = 1 << 14;  // elements per thread, at least

// Byte pointers and strides of several operands over one shape, walked in row-major
// order. Operand 0 is the indexed base, 1 the output or values, 2.. the index tensors.
struct OperandWalk {
  int ndim = 0;
  std::array<int64_t, backend::kMaxLoopDims> sizes{};
  std::vector<std::array<int64_t, backend::kMaxLoopDims>> strides;  // bytes
  std::vector<char*> base;
  int64_t numel = 1;

  OperandWalk(const std::vector<const Tensor*>& ops, const Shape& shape) : strides(ops.size()), base(ops.size()) {
    KILN_CHECK(static_cast<int>(shape.size()) <= backend::kMaxLoopDims, "index",
               "tensors with more than {} dims are not supported (got {})", backend::kMaxLoopDims, shape.size());
    ndim = static_cast<int>(shape.size());
    for (int d = 0; d < ndim; ++d) {
      sizes[d] = shape[d];
      numel *= shape[d];
    }
    for (size_t j = 0; j < ops.size(); ++j) {
      base[j] = static_cast<char*>(ops[j]->data_ptr());
      const int64_t elem = static_cast<int64_t>(ops[j]->element_size());
      for (int d = 0; d < ndim; ++d) strides[j][d] = numel == 0 ? 0 : byte_stride(shape[d], ops[j]->strides()[d], elem);
    }
  }

  // Calls fn(ptrs) for every element in the flat range [begin, end), ptrs[j] pointing at
  // operand j's element.
  template <typename Fn>
  void for_each(int64_t begin, int64_t end, Fn&& fn) const {
    std::array<int64_t, backend::kMaxLoopDims> index{};
    int64_t rem = begin;
    for (int d = ndim - 1; d >= 0; --d) {
      index[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    std::vector<char*> ptrs(base.size());
    const auto locate = [&] {
      for (size_t j = 0; j < base.size(); ++j) {
        char* p = base[j];
        for (int d = 0; d < ndim; ++d) p += index[d] * strides[j][d];
        ptrs[j] = p;
      }
    };
    locate();
    for (int64_t pos = begin; pos < end; ++pos) {
      fn(ptrs.data());
      if (ndim == 0 || pos + 1 == end) continue;
      const int inner = ndim - 1;
      if (++index[inner] < sizes[inner]) {
        for (size_t j = 0; j < ptrs.size(); ++j) ptrs[j] += strides[j][inner];
        continue;
      }
      for (int d = inner; d > 0 && index[d] == sizes[d]; --d) {
        index[d] = 0;
        ++index[d - 1];
      }
      locate();
    }
  }
};

// The byte offset into the base that the index tensors name at one position.
struct IndexOffsets {
  const backend::AdvancedIndexGeometry& g;
  std::vector<int64_t> stride_bytes;

  explicit IndexOffsets(const backend::AdvancedIndexGeometry& geometry) : g(geometry) {
    const int64_t elem = static_cast<int64_t>(g.base.element_size());
    for (size_t k = 0; k < g.indexed_strides.size(); ++k) {
      stride_bytes.push_back(byte_stride(g.indexed_sizes[k], g.indexed_strides[k], elem));
    }
  }

  int64_t operator()(char* const* index_ptrs) const {
    int64_t offset = 0;
    for (size_t k = 0; k < stride_bytes.size(); ++k) {
      int64_t v;
      std::memcpy(&v, index_ptrs[k], sizeof v);
      const int64_t size = g.indexed_sizes[k];
      if (v < -size || v >= size) [[unlikely]] {
        fail(ErrorKind::Index, "index", "index {} is out of bounds for dimension {} with size {}", v,
             g.indexed_dims[k], size);
      }
      if (v < 0) v += size;
      offset += v * stride_bytes[k];
    }
    return offset;
  }
};

std::vector<const Tensor*> walk_operands(const backend::AdvancedIndexGeometry& g, const Tensor& other) {
  std::vector<const Tensor*> ops{&g.base, &other};
  for (const Tensor& index : g.indices) {
    KILN_CHECK(index.dtype() == DType::Int64, "index", "index tensors reach the kernel as int64, got {}",
               dtype_name(index.dtype()));
    ops.push_back(&index);
  }
  return ops;
}

template <size_t kElem>
void index_gather_impl(ThreadPool& pool, const backend::IndexGatherProblem& p) {
  const OperandWalk walk(walk_operands(p.where, p.out), p.out.sizes());
  const IndexOffsets offset_of(p.where);
  pool.parallel_for(walk.numel, kAdvancedGrain, [&](int64_t begin, int64_t end) {
    walk.for_each(begin, end, [&](char* const* ptrs) {
      std::memcpy(ptrs[1], ptrs[0] + offset_of(ptrs + 2), kElem);
    });
  });
}

// Every index is checked before the first write, so an out-of-range one leaves self as
// it was.
void check_all_offsets(const OperandWalk& walk, const IndexOffsets& offset_of) {
  walk.for_each(0, walk.numel, [&](char* const* ptrs) { offset_of(ptrs + 2); });
}

template <size_t kElem>
void index_put_copy(const backend::IndexPutProblem& p) {
  const OperandWalk walk(walk_operands(p.where, p.values), p.values.sizes());
  const IndexOffsets offset_of(p.where);
  check_all_offsets(walk, offset_of);
  walk.for_each(0, walk.numel, [&](char* const* ptrs) {
    std::memcpy(ptrs[0] + offset_of(ptrs + 2), ptrs[1], kElem);
  });
}

template <typename T>
void index_put_accumulate(const backend::IndexPutProblem& p) {
  using Acc = Accumulate<T>;
  const typename Acc::Alpha one = Acc::alpha(Scalar(int64_t{1}));
  const OperandWalk walk(walk_operands(p.where, p.values), p.values.sizes());
  const IndexOffsets offset_of(p.where);
  check_all_offsets(walk, offset_of);
  walk.for_each(0, walk.numel, [&](char* const* ptrs) {
    char* dst = ptrs[0] + offset_of(ptrs + 2);
    T acc, x;
    std::memcpy(&acc, dst, sizeof(T));
    std::memcpy(&x, ptrs[1], sizeof(T));
    acc = Acc::add(acc, x, one);
    std::memcpy(dst, &acc, sizeof(T));
  });
}

// The bits that make an element nonzero: all of them for integers and bool, all but
// each component's sign bit for floats (so -0.0 counts as zero; NaN and inf do not).
template <size_t kElem>
std::array<uint64_t, 2> nonzero_bits(DType dt) {
  std::array<uint64_t, 2> mask{~uint64_t{0}, ~uint64_t{0}};
  if constexpr (kElem < 8) mask[0] = (uint64_t{1} << (8 * kElem)) - 1;
  if (!is_floating(dt) && !is_complex(dt)) return mask;
  const size_t component = is_complex(dt) ? kElem / 2 : kElem;
  for (size_t at = component; at <= kElem; at += component) {
    const size_t bit = 8 * at - 1;
    mask[bit / 64] &= ~(uint64_t{1} << (bit % 64));
  }
  return mask;
}

template <size_t kElem>
bool is_nonzero(const char* p, const std::array<uint64_t, 2>& mask) {
  std::array<uint64_t, 2> bits{};
  std::memcpy(bits.data(), p, kElem);
  return ((bits[0] & mask[0]) | (bits[1] & mask[1])) != 0;
}

template <size_t kElem>
Tensor nonzero_impl(ThreadPool& pool, const Tensor& input) {
  const int64_t ndim = input.dim();
  const OperandWalk walk({&input}, input.sizes());
  const int64_t numel = walk.numel;
  const auto mask = nonzero_bits<kElem>(input.dtype());
  if (numel == 0) return Tensor::empty({0, ndim}, DType::Int64);
  // One output row per nonzero, in row-major order (as masked_select).
  OrderedChunks chunks(pool, numel, kAdvancedGrain);
  const int64_t rows = chunks.count([&](int64_t begin, int64_t end) {
    int64_t count = 0;
    walk.for_each(begin, end, [&](char* const* p) { count += is_nonzero<kElem>(p[0], mask); });
    return count;
  });
  Tensor out = Tensor::empty({rows, ndim}, DType::Int64);
  int64_t* coords = out.data<int64_t>();
  chunks.write([&](int64_t begin, int64_t end, int64_t first) {
    int64_t* dst = coords + first * ndim;
    int64_t flat = begin;
    walk.for_each(begin, end, [&](char* const* p) {
      if (is_nonzero<kElem>(p[0], mask)) {
        int64_t rem = flat;
        for (int64_t d = ndim - 1; d >= 0; --d) {
          dst[d] = rem % walk.sizes[d];
          rem /= walk.sizes[d];
        }
        dst += ndim;
      }
      ++flat;
    });
  });
  return out;
}

}  // namespace

Tensor nonzero(ThreadPool& pool, const Tensor& input) {
  return with_element_size(input.element_size(), "nonzero",
                           [&](auto elem) { return nonzero_impl<decltype(elem)::value>(pool, input); });
}

void index_gather(ThreadPool& pool, const backend::IndexGatherProblem& p) {
  with_element_size(p.out.element_size(), "index", [&](auto elem) { index_gather_impl<decltype(elem)::value>(pool, p); });
}

void index_put(const backend::IndexPutProblem& p) {
  const DType dt = p.where.base.dtype();
  if (!p.accumulate) {
    return with_element_size(p.where.base.element_size(), "index_put_", [&](auto elem) { index_put_copy<decltype(elem)::value>(p); });
  }
  check_addable_dtype(dt, "index_put_", "accumulate is not implemented");
  using PutFn = void (*)(const backend::IndexPutProblem&);
  visit_addable_dtype<PutFn>(dt, nullptr, [](auto tag) -> PutFn {
    return &index_put_accumulate<typename decltype(tag)::type>;
  })(p);
}

}  // namespace kiln::cpu
