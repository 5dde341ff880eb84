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
// float32, float64, bfloat16 and float16 (the narrow ones computed in float32). One pass
// of a dedicated kernel; the output of a channels-last input is channels-last (as in
// PyTorch). The backward is the exact adjoint, interpolate_backward.
// Errors: Value for an unknown mode, both or neither of size/scale_factor, align_corners
// with a nearest mode; Runtime for wrong input ranks or sizes.
Tensor interpolate(const Tensor& input, const std::vector<int64_t>& size = {},
                   const std::vector<double>& scale_factor = {}, std::string_view mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt, bool recompute_scale_factor = false);

// The adjoint of interpolate with the same arguments (PyTorch's upsample_*_backward):
// the gradient with respect to an input of `input_sizes`, given the gradient of the
// output. A gather: each input-gradient element sums the output gradients it
// contributed to, in a fixed order (deterministic, no atomics). Differentiable (its own
// adjoint is interpolate). Errors as interpolate, and for a grad_output whose size is
// not the output's.
Tensor interpolate_backward(const Tensor& grad_output, const Shape& input_sizes, const std::vector<int64_t>& size = {},
                            const std::vector<double>& scale_factor = {}, std::string_view mode = "nearest",
                            std::optional<bool> align_corners = std::nullopt, bool recompute_scale_factor = false);

}  // namespace kiln
