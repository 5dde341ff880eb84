// silu_and_mul front end: the gate and up halves of the last dim as views, then the
// fused kernel of the elementwise table (backend/elementwise.h), which widens narrow
// dtypes and handles strides.
#include "backend/elementwise.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/ops/nn.h"
#include "kiln/tensor.h"
#include "ops/autograd_hooks.h"
#include "ops/nn_utils.h"
#include "ops/op_utils.h"

namespace kiln {

Tensor silu_and_mul(const Tensor& input) {
  KILN_AUTOGRAD(silu_and_mul, input);
  constexpr const char* op = "silu_and_mul";
  check_defined(input, op, "input");
  KILN_CHECK_KIND(is_nn_float(input.dtype()), Type, op,
                  "expected input of dtype float32, float64, float16 or bfloat16, got {}", dtype_name(input.dtype()));
  KILN_CHECK(input.dim() >= 1 && input.size(-1) % 2 == 0, op,
             "expected the last dim to hold gate and up halves (even size), got input of shape {}", input.shape_str());
  const int64_t half = input.size(-1) / 2;
  const Tensor gate = input.narrow(-1, 0, half);
  const Tensor up = input.narrow(-1, half, half);
  Tensor out = Tensor::empty(gate.sizes(), input.dtype(), input.device(), op);
  const auto kernel = backend::elementwise_kernels.on(input.device(), op).silu_and_mul;
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&gate, &up, &out}), 0}; });
  kernel(current_context(), {compute_dtype(input.dtype()), out, gate, up});
  return out;
}

}  // namespace kiln
