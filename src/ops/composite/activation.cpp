// composite::silu_and_mul: the SwiGLU of a fused gate_up projection, unfused.
#include "kiln/error.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/elementwise.h"
#include "ops/composite/composite_util.h"

namespace kiln::composite {

Tensor silu_and_mul(const Tensor& input) {
  constexpr const char* op = "composite.silu_and_mul";
  const DType compute = detail::compute_dtype_of(input, op, "input");
  KILN_CHECK(input.dim() >= 1 && input.size(-1) % 2 == 0, op,
             "expected the last dim to hold gate and up halves (even size), got input of shape {}", input.shape_str());
  const int64_t half = input.size(-1) / 2;
  const Tensor gate = input.narrow(-1, 0, half).to(compute);
  const Tensor up = input.narrow(-1, half, half).to(compute);
  return mul(silu(gate), up).to(input.dtype());
}

}  // namespace kiln::composite
