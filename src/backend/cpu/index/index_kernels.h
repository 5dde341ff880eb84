// CPU kernels behind the indexing ops (internal), installed in the index table
// (backend/index.h) by register.cpp. The front ends in ops/index_ops.cpp validate shapes
// and dtypes and allocate the outputs; these move the data.
//
// Kernels that only move data (index_select, gather, masked_fill, masked_select) are
// chosen by element size, not dtype, so fp8 and every other dtype are copied bit for
// bit. scatter_add does arithmetic and picks a typed kernel once per call.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/index.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

// The values of a 1-D or 0-D int32/int64 index tensor as int64, in order.
std::vector<int64_t> index_values(const Tensor& index);

// out.select(dim, j) = input.select(dim, rows[j]) for every j (the caller checked each
// row is in [0, input.size(dim))). out has input's shape with rows.size() at dim and the
// same dtype. Contiguous runs move with memcpy; work splits over (outer position, j).
void index_select_rows(ThreadPool& pool, const Tensor& out, const Tensor& input, int64_t dim,
                       const std::vector<int64_t>& rows);

// out = gather(input, dim, index): index is int32 or int64 with input's rank (>= 1); out
// has index's shape and input's dtype. Throws an Index-kind Error naming the first
// out-of-range index a worker meets.
void gather(ThreadPool& pool, const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index);

// self[..., index[p], ...] += alpha * src[p] for every position p of index (`dim` picks
// which coordinate the index replaces). index is int32 or int64 with self's rank (>= 1);
// src has self's dtype and rank and covers index's shape. Work splits over the positions
// outside `dim`, so each element of self is owned by one thread and sums its
// contributions in index order. Throws Index-kind Errors for out-of-range indices and
// Type-kind for fp8 dtypes.
void scatter_add(ThreadPool& pool, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                 const Scalar& alpha);

// out = mask ? value : input, with input and mask (bool) already expanded to out's shape
// and `value` pointing at one element of out's dtype. out may be input itself.
void masked_fill(ThreadPool& pool, const Tensor& out, const Tensor& input, const Tensor& mask, const void* value);

// The elements of input where mask (bool, same shape) is true, in row-major order.
Tensor masked_select(ThreadPool& pool, const Tensor& input, const Tensor& mask);

// The coordinates of input's nonzero elements as int64 [count, input.dim()], row-major
// order; floats compare by value (-0.0 is zero, NaN is not), fp8 too.
Tensor nonzero(ThreadPool& pool, const Tensor& input);

// Advanced indexing (backend/index.h): index_gather splits the output over the pool;
// index_put runs in iteration order on the calling thread so repeated positions resolve
// deterministically (last write wins, or sums in index order). Both throw Index-kind
// Errors for out-of-range indices; index_put with accumulate throws Type-kind for fp8.
void index_gather(ThreadPool& pool, const backend::IndexGatherProblem& p);
void index_put(const backend::IndexPutProblem& p);

}  // namespace kiln::cpu
