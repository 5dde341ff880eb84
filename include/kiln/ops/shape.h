// Joining, splitting and copying tensors: torch.cat, stack, split, split_with_sizes,
// chunk, tensor_split, unbind, flip, repeat, tile, tril and triu, with PyTorch's shape
// and dtype rules.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// torch.cat. The result dtype promotes across all inputs (torch.result_type). PyTorch's
// legacy rule applies: 1-D tensors of size [0] are skipped for the shape checks and the
// copy (they still take part in dtype promotion). Every other input must have the same
// number of dims and the same sizes outside `dim`; errors name the tensor's position.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);

// torch.stack: inserts a new dim at `dim` (in [-ndim-1, ndim]) and concatenates along it.
// All inputs must have equal shapes; dtypes promote as in cat.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// The split family returns views of `t` (no copies).
//
// torch.split(t, split_size): pieces of split_size along dim, the last one smaller when
// the size does not divide. split_size 0 is allowed only for an empty dim.
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
// torch.split(t, [s0, s1, ...]) (ATen's split_with_sizes): sizes must be >= 0 and sum
// to t.size(dim). A distinct name keeps split(t, {2}) from meaning two things in C++.
std::vector<Tensor> split_with_sizes(const Tensor& t, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
// torch.chunk: pieces of ceil(size / chunks); may return fewer than `chunks` pieces,
// except that an empty dim gives `chunks` empty pieces.
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);
// torch.tensor_split(t, sections): exactly `sections` pieces, the first size % sections
// of them one element longer.
std::vector<Tensor> tensor_split(const Tensor& t, int64_t sections, int64_t dim = 0);
// torch.tensor_split(t, [i0, i1, ...]): t[:i0], t[i0:i1], ..., t[ik:] along dim, with
// Python slicing (negative indices count from the end, out-of-range ones clamp).
std::vector<Tensor> tensor_split_indices(const Tensor& t, const std::vector<int64_t>& indices, int64_t dim = 0);
// torch.unbind: the slices t.select(dim, i) for every i.
std::vector<Tensor> unbind(const Tensor& t, int64_t dim = 0);

// torch.flip: a copy with the order of elements reversed along each of `dims`
// (repeated dims are an error, as in PyTorch).
Tensor flip(const Tensor& t, const std::vector<int64_t>& dims);

// Tensor.repeat: a new tensor holding `t` repeated repeats[i] times along dim i. repeats
// may be longer than t.dim() (t then gains leading dims of size 1), never shorter
// ("Number of dimensions of repeat dims can not be smaller than number of dimensions of
// tensor"); a 0 gives an empty result; a negative count is an error where it makes a
// negative size (an empty dim times -1 stays empty, as PyTorch multiplies first). All dtypes;
// differentiable (built from unsqueeze, expand and one copy).
Tensor repeat(const Tensor& t, const std::vector<int64_t>& repeats);
// torch.tile: repeat with dims padded by leading 1s when shorter than t.dim() (numpy's
// np.tile rule).
Tensor tile(const Tensor& t, const std::vector<int64_t>& dims);

// torch.tril / torch.triu on the last two dims of a (batched) matrix: elements with
// column - row <= diagonal (tril) or >= diagonal (triu) are kept, the rest set to zero
// (false for bool). Any dtype; at least 2 dims; differentiable (a masked_fill with a
// row/column mask broadcast over the batch). The in-place forms write self.
Tensor tril(const Tensor& t, int64_t diagonal = 0);
Tensor triu(const Tensor& t, int64_t diagonal = 0);
Tensor tril_(const Tensor& self, int64_t diagonal = 0);
Tensor triu_(const Tensor& self, int64_t diagonal = 0);

}  // namespace kiln
