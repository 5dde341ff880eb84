// Backward formulas of the convolutions (kiln/ops/conv.h).
//
// convolution's gradients are convolution_backward: the input gradient is the adjoint
// convolution (conv_transpose for a conv, conv for a conv_transpose), the weight
// gradient is convolution_weight_grad, the bias gradient a sum. Both of those are
// differentiable ops, so gradients of gradients work: convolution_weight_grad(x, dy) is
// bilinear, and its derivatives are a convolution in each argument.
#include "autograd/function.h"
#include "kiln/ops/conv.h"
#include "ops/autograd_hooks.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;
using C = BackwardContext;
using Ints = std::vector<int64_t>;

Tensor convolution_entry(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, const Ints& stride,
                         const Ints& padding, const Ints& dilation, bool transposed, const Ints& output_padding,
                         int64_t groups) {
  Tensor y = below_autograd(
      [&] { return convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups); });
  const Tensor b = bias.value_or(Tensor());
  return record("ConvolutionBackward0", {x, w, b}, y, {Save::input(x), Save::input(w)}, [=](C& c) {
    auto [gx, gw, gb] = convolution_backward(c.grad(), c.saved[0], c.saved[1], stride, padding, dilation, transposed,
                                             output_padding, groups, {c.needs[0], c.needs[1], c.needs[2]});
    return Grads{gx, gw, gb};
  });
}

Tensor weight_grad_entry(const Tensor& x, const Tensor& gy, const Shape& weight_sizes, const Ints& stride,
                         const Ints& padding, const Ints& dilation, int64_t groups) {
  Tensor gw =
      below_autograd([&] { return convolution_weight_grad(x, gy, weight_sizes, stride, padding, dilation, groups); });
  return record("ConvolutionWeightGradBackward0", {x, gy}, gw, {Save::input(x), Save::input(gy)}, [=](C& c) {
    const Tensor &x = c.saved[0], &gy = c.saved[1], &ggw = c.grad();
    Tensor gx, ggy;
    // <ggw, dW(x, gy)> = <ggw * x, gy>: the conv's input gradient for x, the conv itself for gy.
    if (c.needs[0])
      gx = std::get<0>(
          convolution_backward(gy, x, ggw, stride, padding, dilation, false, {0}, groups, {true, false, false}));
    if (c.needs[1]) {
      ggy = convolution(x, ggw, std::nullopt, stride, padding, dilation, false, {0}, groups);
      for (int64_t d = 2; d < ggy.dim(); ++d)
        if (ggy.size(d) != gy.size(d)) ggy = ggy.narrow(d, 0, gy.size(d));
    }
    return Grads{gx, ggy};
  });
}

const bool installed = [] {
  auto& h = autograd_hooks::op_hooks();
  h.convolution = convolution_entry;
  h.convolution_weight_grad = weight_grad_entry;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
