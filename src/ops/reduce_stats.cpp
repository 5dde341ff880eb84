// Front ends of the statistical reductions: var, std and norm
// (torch.linalg.vector_norm): validation, output shape and dtype, then the reduce
// table's kernel (backend/reduce.h), which does the math.
#include <algorithm>
#include <limits>

#include "backend/reduce.h"
#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "ops/autograd_hooks.h"
#include "ops/op_utils.h"
#include "ops/reduce_utils.h"

namespace kiln {
namespace {

// var, or std with take_sqrt.
Tensor var_std(const Tensor& input, const DimList& dims, double correction, bool keepdim, bool take_sqrt,
               const char* op) {
  check_defined(input, op, "input");
  KILN_CHECK_KIND(is_floating(input.dtype()) || is_complex(input.dtype()), Type, op,
                  "std and var only support floating point and complex dtypes (got {})", dtype_name(input.dtype()));
  const ReduceDims rd = reduce_dims(input, dims, keepdim, op);
  Tensor out = Tensor::empty(rd.out_shape, to_real(input.dtype()), kCPU, op);
  const double divisor = std::max(0.0, static_cast<double>(rd.count) - correction);
  const auto kernel = backend::reduce_kernels.on(input.device(), op).variance;
  kernel(current_context(), {input, rd.reduced, divisor, take_sqrt, out});
  return out;
}

// PyTorch refuses the norms without an identity (inf, and every p < 0) over nothing.
void check_norm_identity(const Tensor& input, const DimList& dims, const ReduceDims& rd, double p) {
  if (input.numel() != 0 || (p >= 0 && p != std::numeric_limits<double>::infinity())) return;
  KILN_CHECK(!dims.empty(), "linalg.vector_norm",
             "cannot compute the {} norm on an empty tensor because the operation does not have an identity", p);
  for (int64_t d = 0; d < input.dim(); ++d) {
    KILN_CHECK(!(rd.reduced[d] && input.sizes()[d] == 0), "linalg.vector_norm",
               "cannot compute the {} norm on the dimension {} because this dimension is empty and the operation "
               "does not have an identity",
               p, d);
  }
}

}  // namespace

Tensor var(const Tensor& input, const DimList& dims, double correction, bool keepdim) {
  KILN_AUTOGRAD(var, input, dims, correction, keepdim);
  return var_std(input, dims, correction, keepdim, false, "var");
}

Tensor std(const Tensor& input, const DimList& dims, double correction, bool keepdim) {
  KILN_AUTOGRAD(std, input, dims, correction, keepdim);
  return var_std(input, dims, correction, keepdim, true, "std");
}

Tensor norm(const Tensor& input, double p, const DimList& dims, bool keepdim) {
  KILN_AUTOGRAD(norm, input, p, dims, keepdim);
  const char* op = "linalg.vector_norm";
  check_defined(input, op, "input");
  KILN_CHECK_KIND(is_floating(input.dtype()) || is_complex(input.dtype()), Type, op,
                  "Expected a floating point or complex tensor as input. Got {}", torch_type_name(input.dtype()));
  const ReduceDims rd = reduce_dims(input, dims, keepdim, op);
  check_norm_identity(input, dims, rd, p);
  Tensor out = Tensor::empty(rd.out_shape, to_real(input.dtype()), kCPU, op);
  const auto kernel = backend::reduce_kernels.on(input.device(), op).vector_norm;
  kernel(current_context(), {input, rd.reduced, p, out});
  return out;
}

}  // namespace kiln
