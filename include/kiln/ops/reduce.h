// Reductions, cumulative sums, sorting and top-k, with PyTorch's names and semantics.
//
// Dims: `dims` lists the dims to reduce; an empty list reduces every dim (PyTorch's
// dim=None or dim=[]). Negative dims count from the end; a 0-dim tensor accepts 0 and
// -1; a repeated dim is an error. keepdim keeps each reduced dim with size 1.
//
// Dtypes (PyTorch's rules; "compute wide": f16/bf16/fp8 are computed in float32 and
// stored back in their own dtype):
//   sum, prod   bool and integers accumulate in int64 and return int64; floats and
//               complex return their own dtype; `dtype` converts the input first and
//               sets the result dtype. Float32 sums accumulate in float32, pairwise.
//   mean        floating or complex input (or `dtype`) only.
//   amax, amin, max, min   every dtype but complex; NaN propagates.
//   argmax, argmin, max/min with a dim   int64 indices; NaN wins; the first index
//               among equal values.
//   var, std    floating or complex input, accumulated in float64; complex input gives
//               its real dtype.
//   norm        floating or complex input; the result has the real dtype.
//   cumsum      bool and integers give int64 unless `dtype` is given.
//   sort, topk  every dtype but complex; NaN sorts above every number.
// Results do not depend on the number of threads.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

using DimList = std::vector<int64_t>;

struct ValuesIndices {
  Tensor values;
  Tensor indices;  // int64
};

// torch.sum(input, dim, keepdim, dtype=).
Tensor sum(const Tensor& input, const DimList& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
// torch.mean: the sum over the count; an empty reduction gives NaN.
Tensor mean(const Tensor& input, const DimList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
// torch.prod (taking a dim list, like sum); an empty reduction gives 1.
Tensor prod(const Tensor& input, const DimList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);

// torch.amax / torch.amin. An empty reduced dim is an Index error naming it.
Tensor amax(const Tensor& input, const DimList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& input, const DimList& dims = {}, bool keepdim = false);

// torch.max(input) / torch.min(input): a 0-dim tensor; empty input is an error.
Tensor max(const Tensor& input);
Tensor min(const Tensor& input);
// torch.max(input, dim, keepdim) / torch.min: values and the first index of each.
ValuesIndices max(const Tensor& input, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& input, int64_t dim, bool keepdim = false);

// torch.argmax / torch.argmin. Without a dim: the index into the flattened input (a
// 0-dim result, or all dims of size 1 with keepdim).
Tensor argmax(const Tensor& input, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& input, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// torch.var / torch.std with `correction` (1: Bessel's correction). The divisor is
// max(0, count - correction), so correction >= count gives inf (or NaN for zero spread).
Tensor var(const Tensor& input, const DimList& dims = {}, double correction = 1.0, bool keepdim = false);
Tensor std(const Tensor& input, const DimList& dims = {}, double correction = 1.0, bool keepdim = false);

// torch.linalg.vector_norm(input, ord=p, dim, keepdim): p = 2, 1, inf (max |x|),
// -inf (min |x|), 0 (count of nonzeros) or any other float ((sum |x|^p)^(1/p)).
Tensor norm(const Tensor& input, double p = 2.0, const DimList& dims = {}, bool keepdim = false);

// torch.any / torch.all: whether any / every element over dims is nonzero (NaN is
// nonzero). Every dtype; the result is bool (uint8 for uint8 input, as PyTorch); an empty
// reduction gives false / true.
Tensor any(const Tensor& input, const DimList& dims = {}, bool keepdim = false);
Tensor all(const Tensor& input, const DimList& dims = {}, bool keepdim = false);

// torch.cumsum(input, dim, dtype=).
Tensor cumsum(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt);

// torch.sort. Every kiln sort is stable (ties keep their input order), which is also a
// valid result for stable=false.
ValuesIndices sort(const Tensor& input, int64_t dim = -1, bool descending = false, bool stable = false);
// torch.argsort: sort(...).indices.
Tensor argsort(const Tensor& input, int64_t dim = -1, bool descending = false, bool stable = false);
// torch.topk: the k largest (or smallest) along dim; among equal values the lower index
// comes first. sorted=false leaves the k in an unspecified order. k outside
// [0, size(dim)] is an Index error.
ValuesIndices topk(const Tensor& input, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

}  // namespace kiln
