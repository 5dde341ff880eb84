// take, put_/put and bincount, with PyTorch's semantics (docs/ops.md).
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// input read as if flattened in logical (C) order; the result has index's shape.
// index: int64, negative values wrap, valid range [-numel, numel) (IndexError otherwise).
Tensor take(const Tensor& input, const Tensor& index);

// self (any layout, read and written in logical order)[index[i]] = source[i], or += with
// accumulate (duplicates then sum). index int64, source of self's dtype with index's
// numel. Returns self.
Tensor put_(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate = false);
Tensor put(const Tensor& input, const Tensor& index, const Tensor& source, bool accumulate = false);

// Counts of each value of a 1-D non-negative integer tensor, length max(max(input) + 1,
// minlength); with weights, their sums: float32 for float32 weights, float64 otherwise.
Tensor bincount(const Tensor& input, const std::optional<Tensor>& weights = std::nullopt, int64_t minlength = 0);

}  // namespace kiln
