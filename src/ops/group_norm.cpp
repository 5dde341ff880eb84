// torch.nn.functional.group_norm (kiln/ops/group_norm.h), written with public ops.
#include "kiln/ops/group_norm.h"

#include "kiln/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "ops/op_utils.h"

namespace kiln {

Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  constexpr const char* op = "group_norm";
  check_defined(input, op, "input");
  KILN_CHECK(input.dim() >= 2, op, "Expected at least 2 dimensions for input tensor but received {}", input.dim());
  KILN_CHECK_KIND(is_floating(input.dtype()), Type, op, "expected a floating-point input, got {}",
                  dtype_name(input.dtype()));
  const int64_t N = input.size(0), C = input.size(1);
  KILN_CHECK(num_groups > 0 && C % num_groups == 0, op,
             "Expected number of channels in input to be divisible by num_groups, but got input of shape {} and "
             "num_groups={}", input.shape_str(), num_groups);
  for (const auto* t : {&weight, &bias}) {
    if (t->has_value()) {
      KILN_CHECK((*t)->dim() == 1 && (*t)->size(0) == C, op,
                 "Expected weight and bias to be tensors of shape [{}] (the channels), got {}", C, (*t)->shape_str());
    }
  }
  const DType compute = input.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const Tensor x = input.to(compute).reshape({N, num_groups, -1});
  const Tensor centred = sub(x, mean(x, {2}, true));
  const Tensor normalised = mul(centred, rsqrt(add(var(x, {2}, 0.0, true), Scalar(eps)))).reshape(input.sizes());
  Shape channel_shape(input.dim(), 1);
  channel_shape[1] = C;
  Tensor y = normalised;
  if (weight) y = mul(y, weight->to(compute).view(channel_shape));
  if (bias) y = add(y, bias->to(compute).view(channel_shape));
  return y.to(input.dtype());
}

}  // namespace kiln
