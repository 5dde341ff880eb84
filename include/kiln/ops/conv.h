// torch.nn.functional.conv1d / conv2d: the reference path.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// conv2d(input [N, C, H, W] or [C, H, W], weight [O, C / groups, kh, kw], bias [O]?,
// stride, padding, dilation, groups): PyTorch's shapes and rules, each of stride,
// padding, dilation one entry or one per spatial dim, padding zeros.
// Hout = floor((H + 2 p - d (kh - 1) - 1) / s) + 1. This is the readable reference
// path: im2col by index_select gathers, then one matmul per group. It is built from
// public ops, so it is differentiable (input, weight, bias), but it is not the fast
// kernel the roadmap asks for (no channels-last, no depthwise fast path yet).
// Errors: Runtime for wrong ranks, channels not divisible by groups, a weight that does
// not match, an output size below 1; Value for non-positive stride/dilation or groups.
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);
// conv1d: the same over one spatial dim (input [N, C, L] or [C, L], weight [O, C / groups, k]).
Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);

}  // namespace kiln
