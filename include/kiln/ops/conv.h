// torch.nn.functional.conv1d/2d/3d and conv_transpose1d/2d/3d, torch.convolution, and
// the backward of a convolution as ops (docs/ops.md "Convolution").
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// A conv's padding: amounts (one entry, or one per spatial dim) or PyTorch's strings
// "valid" (no padding) and "same" (output size = input size; stride 1 only; an odd
// total d * (k - 1) puts the extra zero on the right, as PyTorch does).
struct ConvPadding {
  std::vector<int64_t> amounts;
  std::string mode;  // empty when amounts are given
  ConvPadding(std::initializer_list<int64_t> values) : amounts(values) {}
  ConvPadding(std::vector<int64_t> values) : amounts(std::move(values)) {}
  ConvPadding(const char* name) : mode(name) {}
  ConvPadding(std::string name) : mode(std::move(name)) {}
};

// conv{1,2,3}d(input [N, C, *spatial] or [C, *spatial], weight [O, C / groups, *kernel],
// bias [O]?, stride, padding, dilation, groups): PyTorch's shapes, rules and messages.
// stride and dilation take one entry or one per spatial dim. Output size per dim:
// floor((in + 2 p - d (k - 1) - 1) / s) + 1. float32, float64, bfloat16 and float16
// (computed in float32). A 4-D / 5-D input or weight with channels_last(_3d) strides is
// computed in that layout and the output has channels-last strides.
// Errors: Runtime for wrong ranks, channels not divisible by groups, a weight or bias
// that does not match, an output size below 1, bad stride/padding/dilation/groups;
// Type for a dtype that is not floating point.
Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const std::vector<int64_t>& stride = {1}, const ConvPadding& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const std::vector<int64_t>& stride = {1}, const ConvPadding& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const std::vector<int64_t>& stride = {1}, const ConvPadding& padding = {0},
              const std::vector<int64_t>& dilation = {1}, int64_t groups = 1);

// conv_transpose{1,2,3}d(input [N, Cin, *spatial] or unbatched, weight [Cin, Cout / groups,
// *kernel], bias [Cout]?, stride, padding, output_padding, groups, dilation): the adjoint
// of conv (PyTorch's argument order: groups before dilation). Output size per dim:
// (in - 1) s - 2 p + d (k - 1) + output_padding + 1; output_padding must be smaller than
// stride or dilation.
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                        const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
                        const std::vector<int64_t>& output_padding = {0}, int64_t groups = 1,
                        const std::vector<int64_t>& dilation = {1});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                        const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
                        const std::vector<int64_t>& output_padding = {0}, int64_t groups = 1,
                        const std::vector<int64_t>& dilation = {1});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                        const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& padding = {0},
                        const std::vector<int64_t>& output_padding = {0}, int64_t groups = 1,
                        const std::vector<int64_t>& dilation = {1});

// torch.convolution: batched input only, every list one entry or one per spatial dim.
// Differentiable in input, weight and bias (twice: the gradients are convolutions too).
Tensor convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                   const std::vector<int64_t>& dilation, bool transposed,
                   const std::vector<int64_t>& output_padding, int64_t groups);

// The gradient of a (non-transposed) convolution with respect to its weight:
// sum over the batch and output positions of grad_output x the input windows, shaped
// weight_sizes [O, C / groups, *kernel]. Channels-last when input or grad_output is.
Tensor convolution_weight_grad(const Tensor& input, const Tensor& grad_output, const Shape& weight_sizes,
                               const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                               const std::vector<int64_t>& dilation, int64_t groups);

// torch.ops.aten.convolution_backward: (grad_input, grad_weight, grad_bias) of
// convolution(input, weight, bias, ...) for grad_output; an entry is undefined where
// output_mask is false. grad_output is taken in the layout the forward computed in.
std::tuple<Tensor, Tensor, Tensor> convolution_backward(const Tensor& grad_output, const Tensor& input,
                                                        const Tensor& weight, const std::vector<int64_t>& stride,
                                                        const std::vector<int64_t>& padding,
                                                        const std::vector<int64_t>& dilation, bool transposed,
                                                        const std::vector<int64_t>& output_padding, int64_t groups,
                                                        std::array<bool, 3> output_mask = {true, true, true});

}  // namespace kiln
