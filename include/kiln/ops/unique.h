// torch.unique and torch.unique_consecutive, with PyTorch's semantics (docs/ops.md).
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// values: the distinct elements (dim = nullopt: of the flattened input, 1-D) or the
// distinct slices along dim; inverse_indices (int64; input's shape without a dim, else
// [input.size(dim)]): where each element or slice of the input landed in values;
// counts (int64, one per value). inverse_indices and counts are left undefined unless
// asked for.
struct UniqueResult {
  Tensor values;
  Tensor inverse_indices;
  Tensor counts;
};

// torch.unique: values in ascending order (slices in lexicographic order). kiln always
// sorts: `sorted = false` leaves the order unspecified in PyTorch, and the sorted order
// is one such order. NaN equals nothing, so every NaN is its own value (as PyTorch;
// numpy merges them). Every real dtype; complex is PyTorch's RuntimeError ("\"unique\" not
// implemented for 'ComplexFloat'"). With a dim: the input
// may have no empty dim other than `dim` ("There are 0 sized dimensions, and they
// aren't selected, so unique cannot be applied"); the lexicographic sort costs one
// stable sort per element of a slice.
UniqueResult unique(const Tensor& input, bool sorted = true, bool return_inverse = false,
                    bool return_counts = false, std::optional<int64_t> dim = std::nullopt);

// torch.unique_consecutive: the first element (or slice) of every run of equal
// neighbours, in input order. Every dtype, complex included.
UniqueResult unique_consecutive(const Tensor& input, bool return_inverse = false, bool return_counts = false,
                                std::optional<int64_t> dim = std::nullopt);

}  // namespace kiln
