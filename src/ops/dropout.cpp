// torch.nn.functional.dropout (kiln/ops/dropout.h), built from rand and mul: the mask
// is a constant of the product, so autograd's mul formula is dropout's backward.
#include "kiln/ops/dropout.h"

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

// dropout with one Bernoulli draw per element of `mask_shape`, broadcast over the input.
Tensor masked_dropout(const char* op, const Tensor& input, double p, bool training, Generator* gen,
                      const Shape& mask_shape) {
  KILN_CHECK_KIND(p >= 0.0 && p <= 1.0, Value, op, "dropout probability has to be between 0 and 1, but got {}", p);
  KILN_CHECK_KIND(is_floating(input.dtype()), Type, op, "expected a floating-point input, got {}",
                  dtype_name(input.dtype()));
  if (!training || p == 0.0 || input.numel() == 0) return input;
  if (p == 1.0) return mul(input, zeros({}, input.dtype()));
  // Uniforms in float32 whatever the input dtype, so a seed gives the same mask for every
  // dtype; an element (or channel) survives when its uniform is >= p.
  const Tensor keep = ge(rand(mask_shape, DType::Float32, gen), Scalar(p));
  const Tensor scale = mul(keep.to(input.dtype()), Scalar(1.0 / (1.0 - p)));
  return mul(input, scale);
}

}  // namespace

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  check_defined(input, "dropout", "input");
  return masked_dropout("dropout", input, p, training, gen, input.sizes());
}

Tensor dropout2d(const Tensor& input, double p, bool training, Generator* gen) {
  check_defined(input, "dropout2d", "input");
  KILN_CHECK(input.dim() == 3 || input.dim() == 4, "dropout2d",
             "expected a 4-D input [N, C, H, W] or an unbatched 3-D input [C, H, W], got {}", input.shape_str());
  Shape channels = input.sizes();
  channels[channels.size() - 1] = 1;
  channels[channels.size() - 2] = 1;
  return masked_dropout("dropout2d", input, p, training, gen, channels);
}

}  // namespace kiln
