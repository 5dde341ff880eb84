// Advanced indexing with PyTorch's semantics: torch.nonzero, Tensor.index (aten::index,
// what self[i0, i1, ...] does with index tensors) and index_put_ (self[...] = v).
//
// An index list has one entry per leading dim of self; an empty entry (std::nullopt) takes
// that dim whole, like `:`. Entries are int64 or int32 tensors (negative values count from
// the end), or bool/uint8 masks, which stand for the index tensors of their nonzero()
// coordinates and cover as many dims as they have (a 0-dim mask adds a dim of size 1 that
// it keeps whole (true) or empties (false)). The index tensors broadcast together to one
// shape B. When they are adjacent, B replaces the dims they index in place; when an empty
// entry separates them, B comes first and the remaining dims follow, in order (numpy's and
// PyTorch's rule). Out-of-range indices are Index errors: "index 5 is out of bounds for
// dimension 0 with size 3".
#pragma once

#include <optional>
#include <vector>

#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln {

using IndexList = std::vector<std::optional<Tensor>>;

// torch.nonzero: the coordinates of input's nonzero elements, int64 [count, input.dim()],
// in row-major order. Floats compare by value: -0.0 is zero; NaN is nonzero.
Tensor nonzero(const Tensor& input);

// torch.Tensor.__getitem__ with index tensors (aten::index): a new tensor, never a view.
Tensor index(const Tensor& self, const IndexList& indices);

// Tensor.index_put_(indices, values, accumulate): self[indices] = values, values
// broadcast to the shape index(self, indices) would have and of self's dtype. With
// accumulate, repeated positions sum their values (in index order); without, the last
// one wins. A single mask with a one-element `values` fills through masked_fill_ (and
// then converts the value, as PyTorch).
Tensor index_put_(const Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate = false);
// self[indices] = value for a number (PyTorch's C++ Tensor::index_put_(indices, Scalar)):
// the value must fit self's dtype ("value cannot be converted to type uint8 without
// overflow"), then it is written as a 0-dim tensor of self's dtype.
Tensor index_put_(const Tensor& self, const IndexList& indices, const Scalar& value);
// torch.index_put: the same on a copy of self.
Tensor index_put(const Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate = false);

}  // namespace kiln
