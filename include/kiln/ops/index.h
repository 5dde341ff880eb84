// Indexing ops with PyTorch's semantics: index_select, gather, scatter_add, index_add,
// embedding, masked_fill, masked_select.
//
// Index tensors may be int32 or int64 (PyTorch requires int64 for gather/scatter; kiln
// also takes int32 there). Indices are never wrapped: a negative or too-large index is
// an Index-kind kiln::Error, as in PyTorch. Ops that only move data (index_select,
// gather, embedding, masked_*) work on every dtype, fp8 included, copying bytes exactly.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln {

// torch.index_select: the slices input.select(dim, index[j]) stacked along dim.
// index: 1-D or 0-D. Out of range: "index out of range in self".
Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index);

// torch.gather: out[i][j][k] = input[i][index[i][j][k]][k] (dim = 1). index has input's
// number of dims and index.size(d) <= input.size(d) for d != dim; out has index's shape.
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);

// torch.scatter_add / Tensor.scatter_add_: self[i][index[i][j][k]][k] += src[i][j][k]
// (dim = 1) over the positions of index; index.size(d) <= src.size(d) for every d and
// <= self.size(d) for d != dim. src must have self's dtype. Deterministic: each element
// of self sums its contributions in index order, whatever the thread count.
// f16/bf16 add in f32 and round after every addition (as PyTorch's CPU kernel); bool
// adds as logical or; integers wrap. fp8 is not supported (Type error).
Tensor scatter_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// Tensor.index_add_ / torch.index_add: self.select(dim, index[j]) += alpha * source.select(dim, j).
// index: 1-D or 0-D with source.size(dim) entries; source has self's shape outside dim
// and self's dtype. alpha must be integral for integer self, bool for bool self.
Tensor index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                  const Scalar& alpha = Scalar(int64_t{1}));
Tensor index_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = Scalar(int64_t{1}));

// torch.embedding(weight, indices): the rows weight[indices], shape indices.shape + [D].
// weight: 2-D [num_embeddings, D]. padding_idx only affects the backward pass in PyTorch;
// it is accepted here and checked to lie in [-num_embeddings, num_embeddings).
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);

// torch.masked_fill: where mask is true, `value` (cast to the input's dtype); the
// result has the broadcast shape of input and mask. mask must be bool.
Tensor masked_fill(const Tensor& input, const Tensor& mask, const Scalar& value);
// value as a 0-dim tensor (PyTorch's Tensor overload).
Tensor masked_fill(const Tensor& input, const Tensor& mask, const Tensor& value);
// In place: mask must broadcast to self's shape.
Tensor masked_fill_(const Tensor& self, const Tensor& mask, const Scalar& value);
Tensor masked_fill_(const Tensor& self, const Tensor& mask, const Tensor& value);

// torch.masked_select: the elements of input (broadcast with mask) where mask is true,
// in row-major order, as a 1-D tensor.
Tensor masked_select(const Tensor& input, const Tensor& mask);

}  // namespace kiln
