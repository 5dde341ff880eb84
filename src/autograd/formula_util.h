// Helpers shared by the backward formulas (internal). Everything here is built from
// public ops, so it is itself recorded when a backward runs with create_graph.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/ops/reduce.h"
#include "kiln/tensor.h"

namespace kiln::autograd {

// Whether a tensor of `shape` broadcasts to `target` (torch's is_expandable_to).
bool is_expandable_to(const Shape& shape, const Shape& target);
// Sums a broadcast gradient back to `shape` (torch's sum_to_size).
Tensor sum_to(const Tensor& g, const Shape& shape);
// The real part of a complex tensor, as a new tensor of the real dtype.
Tensor real_part(const Tensor& t);
// The reduced dims of a reduction over `dims` of a tensor with `ndim` dims, wrapped and
// sorted (an empty list means all).
std::vector<int64_t> reduced_dims(const DimList& dims, int64_t ndim);
// The gradient of a reduction's output, viewed with the reduced dims kept (size 1) and
// expanded to the input's sizes.
Tensor expand_reduced(const Tensor& g, const Shape& input_sizes, const std::vector<int64_t>& dims, bool keepdim);
// Only the view with the reduced dims kept (size 1), not expanded.
Tensor keep_reduced(const Tensor& t, const Shape& input_sizes, const std::vector<int64_t>& dims, bool keepdim);
// A tensor of `sizes` that is zero except for `g` placed at [start, start + g.size(dim))
// along dim (the backward of narrow/slice/select), built by concatenation.
Tensor embed_along(const Tensor& g, const Shape& sizes, int64_t dim, int64_t start);
// g * conj(t) (the chain rule's product under PyTorch's complex convention).
Tensor mul_conj(const Tensor& g, const Tensor& t);
// Zeros like t.
Tensor zeros_of(const Tensor& t);
// Marks `view` (a recorded view of `base`) as viewing base's root, for in-place ops on
// it; returns it.
Tensor as_view_of(const Tensor& base, Tensor view);

}  // namespace kiln::autograd
