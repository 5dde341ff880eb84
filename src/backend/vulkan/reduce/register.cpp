// Installs the Vulkan reduction kernel (shaders/reduce_rows.comp): sum, mean, amax and
// amin of float32/float16/bfloat16/float8 input over any set of dims, in float32. The
// reduced dims are moved last and made contiguous on the device first (no copy when they
// already are, as for the last dim of a contiguous tensor), then each row is one work
// group. The arg kinds, prod, norms, var/std and cumsum have no Vulkan kernel yet.
#include <vector>

#include "backend/reduce.h"
#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

using backend::ReduceKind;

bool is_float_storage(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || is_fp8(t);
}

void reduce(const ExecutionContext&, const backend::ReduceProblem& p) {
  const char* op = backend::reduce_kind_name(p.kind);
  if (p.kind != ReduceKind::Sum && p.kind != ReduceKind::Max && p.kind != ReduceKind::Min) missing_kernel(op);
  KILN_CHECK_KIND(!p.indices.defined(), NotImplemented, op, "indices have no Vulkan kernel yet");
  KILN_CHECK_KIND(is_float_storage(p.input.dtype()) && is_float_storage(p.values.dtype()), NotImplemented, op,
                  "{} input has no Vulkan kernel (float32, float16, bfloat16 and float8 do)",
                  dtype_name(p.input.dtype()));
  Shape order;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < p.input.dim(); ++d) {
    if (!p.reduced[d]) {
      order.push_back(d);
      rows *= p.input.size(d);
    }
  }
  for (int64_t d = 0; d < p.input.dim(); ++d) {
    if (p.reduced[d]) {
      order.push_back(d);
      cols *= p.input.size(d);
    }
  }
  if (rows == 0) return;
  const Tensor x = p.input.permute(order).contiguous();
  const Binding out = bind(p.values, op);
  const Binding in = bind(x, op);
  struct {
    uint32_t rows, cols;
    float divisor;
    uint32_t out_first, in_first;
  } push{static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), static_cast<float>(p.divisor), out.first, in.first};
  const uint32_t spec[] = {dtype_code(x.dtype()), dtype_code(p.values.dtype()), static_cast<uint32_t>(p.kind)};
  const auto grid = grid_for(rows, 1, op);
  dispatch(op, "reduce_rows", spec, {out, in}, &push, sizeof(push), grid[0], grid[1]);
}

const bool registered = [] {
  backend::ReduceKernels k;
  k.reduce = &reduce;
  k.variance = [](const ExecutionContext&, const backend::VarianceProblem&) { missing_kernel("var/std"); };
  k.vector_norm = [](const ExecutionContext&, const backend::VectorNormProblem&) { missing_kernel("norm"); };
  k.cumsum = [](const ExecutionContext&, const backend::CumsumProblem&) { missing_kernel("cumsum"); };
  backend::reduce_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
