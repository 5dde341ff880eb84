// torch.nn.functional.dropout (kiln/ops/dropout.h), built from rand and mul: the mask
// is a constant of the product, so autograd's mul formula is dropout's backward.
#include "kiln/ops/dropout.h"

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "ops/op_utils.h"

namespace kiln {

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  check_defined(input, "dropout", "input");
  KILN_CHECK_KIND(p >= 0.0 && p <= 1.0, Value, "dropout", "dropout probability has to be between 0 and 1, but got {}",
                  p);
  KILN_CHECK_KIND(is_floating(input.dtype()), Type, "dropout", "expected a floating-point input, got {}",
                  dtype_name(input.dtype()));
  if (!training || p == 0.0 || input.numel() == 0) return input;
  if (p == 1.0) return mul(input, zeros({}, input.dtype()));
  // Uniforms in float32 whatever the input dtype, so a seed gives the same mask for every
  // dtype; an element survives when its uniform is >= p.
  const Tensor keep = ge(rand(input.sizes(), DType::Float32, gen), Scalar(p));
  const Tensor scale = mul(keep.to(input.dtype()), Scalar(1.0 / (1.0 - p)));
  return mul(input, scale);
}

}  // namespace kiln
