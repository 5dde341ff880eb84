// torch.nn.functional.group_norm.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// group_norm(input [N, C, *], num_groups, weight [C]?, bias [C]?, eps=1e-5): each
// sample's channels split into num_groups groups, each normalised by its own mean and
// biased variance, then scaled and shifted per channel. Computed in float32 (float64 for
// float64 input) from public ops, so autograd differentiates it; the result has the
// input's dtype. Floating input only.
// Errors: Runtime when C is not divisible by num_groups (PyTorch's wording), for fewer
// than 2 dims, or a weight/bias not of shape [C].
Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);

}  // namespace kiln
