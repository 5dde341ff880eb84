// softmax / log_softmax front end: dtype rules, the [outer, dim, inner] view of the
// input, then the softmax kernel of the input's device (backend/softmax.h).
#include <optional>

#include "backend/softmax.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/ops/nn.h"
#include "kiln/tensor.h"
#include "ops/autograd_hooks.h"
#include "ops/nn_utils.h"
#include "ops/op_utils.h"

namespace kiln {
namespace {

Tensor softmax_impl(const char* op, const Tensor& input, int64_t dim, std::optional<DType> dtype, bool log) {
  check_defined(input, op, "input");
  const int64_t ndim = input.dim();
  const int64_t d = wrap_dim(dim, ndim, op);
  const DType want = dtype.value_or(input.dtype());
  if (!is_nn_float(want)) {
    // PyTorch's wording, which names its kernel; then what kiln accepts.
    const bool last = ndim == 0 || d == ndim - 1;
    fail(ErrorKind::Type, op,
         "\"{}{}_kernel_impl\" not implemented for '{}' (got {} {}; expected float32, float64, float16 or "
         "bfloat16: pass dtype= to convert)",
         log ? "log_softmax" : "softmax", last ? "_lastdim" : "", torch_type_name(want),
         dtype ? "dtype" : "input of dtype", dtype_name(want));
  }
  // With dtype, PyTorch converts the input first.
  const Tensor x = input.to(want).contiguous();
  Tensor out = Tensor::empty(x.sizes(), want, x.device());
  if (x.numel() == 0) return out;

  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.size(i);
  for (int64_t i = d + 1; i < ndim; ++i) inner *= x.size(i);
  const int64_t size = ndim == 0 ? 1 : x.size(d);

  const auto kernel = backend::softmax_kernels.on(x.device(), op).softmax;
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&x, &out}), 0}; });
  const ExecutionContext ctx = current_context();
  if (inner > 1 && is_reduced_float(want)) {
    // The strided path runs in float32 and float64 only: widen, then store narrow.
    const Tensor xf = x.to(DType::Float32);
    Tensor of = Tensor::empty(x.sizes(), DType::Float32, x.device());
    kernel(ctx, {DType::Float32, xf.data_ptr(), of.data_ptr(), outer, size, inner, log});
    out.copy_(of);
    return out;
  }
  kernel(ctx, {want, x.data_ptr(), out.data_ptr(), outer, size, inner, log});
  return out;
}

}  // namespace

Tensor softmax(const Tensor& input, int64_t dim, std::optional<DType> dtype) {
  KILN_AUTOGRAD(softmax, input, dim, dtype);
  return softmax_impl("softmax", input, dim, dtype, false);
}

Tensor log_softmax(const Tensor& input, int64_t dim, std::optional<DType> dtype) {
  KILN_AUTOGRAD(log_softmax, input, dim, dtype);
  return softmax_impl("log_softmax", input, dim, dtype, true);
}

}  // namespace kiln
