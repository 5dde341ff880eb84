// silu_and_mul front end: the gate and up halves of the last dim as views, then the
// elementwise engine (which widens narrow dtypes and handles strides) with the fused
// SIMD kernel of backend/cpu/activation_fused_kernels.cpp.
#include "backend/cpu/elementwise/activation_fused_kernels.h"
#include "backend/cpu/common/loops.h"
#include "kiln/error.h"
#include "kiln/ops/nn.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"
#include "ops/nn_utils.h"
#include "ops/op_utils.h"

namespace kiln {

Tensor silu_and_mul(const Tensor& input) {
  constexpr const char* op = "silu_and_mul";
  check_defined(input, op, "input");
  KILN_CHECK_KIND(is_nn_float(input.dtype()), Type, op,
                  "expected input of dtype float32, float64, float16 or bfloat16, got {}", dtype_name(input.dtype()));
  KILN_CHECK(input.dim() >= 1 && input.size(-1) % 2 == 0, op,
             "expected the last dim to hold gate and up halves (even size), got input of shape {}", input.shape_str());
  const int64_t half = input.size(-1) / 2;
  const Tensor gate = input.narrow(-1, 0, half);
  const Tensor up = input.narrow(-1, half, half);
  Tensor out = Tensor::empty(gate.sizes(), input.dtype());
  const DType compute = compute_dtype(input.dtype());
  ThreadPool& pool = default_thread_pool();
  if (compute == DType::Float64) {
    cpu::elementwise_loop<2>(pool, out, compute, {&gate, &up}, {compute, compute},
                             [](char* y, const char* g, const char* u, int64_t n) {
                               cpu::mul_silu(reinterpret_cast<const double*>(u), reinterpret_cast<const double*>(g),
                                             reinterpret_cast<double*>(y), n);
                             });
  } else {
    cpu::elementwise_loop<2>(pool, out, compute, {&gate, &up}, {compute, compute},
                             [](char* y, const char* g, const char* u, int64_t n) {
                               cpu::mul_silu(reinterpret_cast<const float*>(u), reinterpret_cast<const float*>(g),
                                             reinterpret_cast<float*>(y), n);
                             });
  }
  return out;
}

}  // namespace kiln
