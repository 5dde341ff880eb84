// The index family of the kernel table: index_select/embedding rows, gather,
// scatter_add/index_add, masked_fill and masked_select (front end: src/ops/index_ops.cpp,
// which checks shapes, dtypes, bounds and overlaps and allocates the outputs), and
// advanced indexing: nonzero, index, index_put_ (front end: src/ops/advanced_index.cpp).
//
// Kernels that only move data (index_select, gather, masked_fill, masked_select) copy
// elements bit for bit, so fp8 and every other dtype work alike. Every tensor has at
// most kMaxLoopDims dims (backend/elementwise.h).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/elementwise.h"
#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln::backend {

// out.select(dim, j) = input.select(dim, rows[j]) for every j, each row in
// [0, input.size(dim)). out has input's shape with rows.size() at dim, input's dtype.
struct IndexSelectProblem {
  const Tensor& out;
  const Tensor& input;
  int64_t dim;
  const std::vector<int64_t>& rows;
};

// out = gather(input, dim, index): index is int32 or int64 with input's rank (>= 1); out
// has index's shape and input's dtype. An out-of-range index is an Index error.
struct GatherProblem {
  const Tensor& out;
  const Tensor& input;
  int64_t dim;
  const Tensor& index;
};

// self[..., index[p], ...] += alpha * src[p] for every position p of index (`dim` picks
// which coordinate the index replaces); index is int32 or int64 with self's rank (>= 1),
// src has self's dtype and rank and covers index's shape. Each element of self sums its
// contributions in index order. Index errors for out-of-range indices, Type for fp8.
struct ScatterAddProblem {
  const Tensor& self;
  int64_t dim;
  const Tensor& index;
  const Tensor& src;
  const Scalar& alpha;
};

// out = mask ? value : input, with input and mask (bool) expanded to out's shape and
// `value` a 0-dim tensor of out's dtype. out may be input itself.
struct MaskedFillProblem {
  const Tensor& out;
  const Tensor& input;
  const Tensor& mask;
  const Tensor& value;
};

// Advanced indexing (self[i0, i1, ...] with index tensors), PyTorch's restrided form:
// every operand is viewed over one iteration shape (the result's), `base` with stride 0
// on the broadcast index dims, and index k (int32 or int64, expanded to the iteration
// shape) adds wrap(index_k[p]) * indexed_strides[k] elements to base's position p,
// where wrap maps [-size, 0) to [0, size). An index outside [-indexed_sizes[k],
// indexed_sizes[k]) is an Index error naming indexed_dims[k] (a dim of the indexed
// tensor, for the message).
struct AdvancedIndexGeometry {
  const Tensor& base;
  const std::vector<Tensor>& indices;
  const std::vector<int64_t>& indexed_sizes;
  const std::vector<int64_t>& indexed_strides;
  const std::vector<int64_t>& indexed_dims;
};

// out[p] = base[p + offset(p)]; out is contiguous with the iteration shape, base's dtype.
struct IndexGatherProblem {
  const Tensor& out;
  AdvancedIndexGeometry where;
};

// base[p + offset(p)] = values[p] (or += with accumulate), values already expanded to the
// iteration shape with base's dtype. Runs in iteration order on one thread, so a position
// named twice gets the last value (or sums in index order), whatever the thread count;
// every index is checked before anything is written.
struct IndexPutProblem {
  AdvancedIndexGeometry where;
  const Tensor& values;
  bool accumulate;
};

struct IndexKernels {
  // The values of a 1-D or 0-D int32/int64 index tensor as int64, in order.
  std::vector<int64_t> (*index_values)(const ExecutionContext& ctx, const Tensor& index) = nullptr;
  void (*index_select)(const ExecutionContext& ctx, const IndexSelectProblem& p) = nullptr;
  void (*gather)(const ExecutionContext& ctx, const GatherProblem& p) = nullptr;
  void (*scatter_add)(const ExecutionContext& ctx, const ScatterAddProblem& p) = nullptr;
  void (*masked_fill)(const ExecutionContext& ctx, const MaskedFillProblem& p) = nullptr;
  // The elements of input where mask (bool, input's shape) is true, in row-major order.
  Tensor (*masked_select)(const ExecutionContext& ctx, const Tensor& input, const Tensor& mask) = nullptr;
  // The coordinates of input's nonzero elements (any dtype; -0.0 is zero, NaN is not), in
  // row-major order, as an int64 [count, input.dim()] tensor.
  Tensor (*nonzero)(const ExecutionContext& ctx, const Tensor& input) = nullptr;
  void (*index_gather)(const ExecutionContext& ctx, const IndexGatherProblem& p) = nullptr;
  void (*index_put)(const ExecutionContext& ctx, const IndexPutProblem& p) = nullptr;
};

inline KernelTable<IndexKernels> index_kernels{"index"};

}  // namespace kiln::backend
