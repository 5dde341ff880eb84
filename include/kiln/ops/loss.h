// Loss functions (torch.nn.functional), written with public ops so that autograd
// differentiates them through their parts.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/tensor.h"

namespace kiln {

// torch.nn.functional.cross_entropy(input, target, weight=None, ignore_index=-100,
// reduction="mean", label_smoothing=0.0).
//  - input: [C], [N, C] or [N, C, d1, ...] unnormalised scores (float dtypes); the class
//    dim is 1 (0 for 1-D input).
//  - target: class indices (int32/int64) of input's shape without the class dim, or class
//    probabilities of input's shape (a float dtype).
//  - weight: [C] per-class weights. ignore_index: targets equal to it add nothing and are
//    not counted (index targets only).
//  - reduction: "mean" (index targets: divided by the summed weights of the counted
//    targets; probability targets: by the number of rows), "sum" or "none".
//  - label_smoothing in [0, 1]: the target mixes (1 - s) of itself with s spread evenly
//    over the C classes, PyTorch's formula.
// Errors: Index for a target outside [0, C) that is not ignore_index ("Target 5 is out
// of bounds."), Value for a bad reduction or label_smoothing, Runtime for shapes.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = std::nullopt,
                     int64_t ignore_index = -100, std::string_view reduction = "mean", double label_smoothing = 0.0);

// torch.nn.functional.mse_loss: mean (or sum, or none) of (input - target)^2, broadcasting.
Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean");

}  // namespace kiln
