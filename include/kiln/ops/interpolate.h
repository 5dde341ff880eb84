// torch.nn.functional.interpolate (upsampling and downsampling).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// interpolate(input [N, C, *spatial] with 1-3 spatial dims, size or scale_factor, mode,
// align_corners): mode "nearest", "nearest-exact", "linear" (3-D input), "bilinear"
// (4-D) or "trilinear" (5-D). `size` and `scale_factor` hold one entry or one per
// spatial dim (exactly one of them is given). Source positions follow PyTorch: the
// scale is in/out, or 1/scale_factor when a scale factor is given (and
// recompute_scale_factor is not set); nearest: floor(dst * scale), nearest-exact:
// floor((dst + 0.5) * scale), linear without align_corners: max((dst + 0.5) * scale -
// 0.5, 0), with align_corners: dst * (in - 1) / (out - 1). Floating input only.
// Built from index_select (and weighted sums for the linear modes) one spatial dim at a
// time, so the backward is the exact adjoint: each input element sums the gradients of
// the outputs it contributes to, in a fixed order (no atomics, deterministic).
// Errors: Value for an unknown mode, both or neither of size/scale_factor, align_corners
// with a nearest mode; Runtime for wrong input ranks or sizes.
Tensor interpolate(const Tensor& input, const std::vector<int64_t>& size = {},
                   const std::vector<double>& scale_factor = {}, std::string_view mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt, bool recompute_scale_factor = false);

}  // namespace kiln
