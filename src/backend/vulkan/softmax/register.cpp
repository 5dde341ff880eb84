// Installs the Vulkan softmax kernel (shaders/softmax.comp): float32, float16 and
// bfloat16 rows computed in float32, one work group per row. float64 has no Vulkan
// kernel (MoltenVK has no float64 at all).
#include "backend/softmax.h"
#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::vulkan {
namespace {

void softmax(const ExecutionContext&, const backend::SoftmaxProblem& p) {
  const char* op = p.log ? "log_softmax" : "softmax";
  KILN_CHECK_KIND(p.dtype == DType::Float32 || p.dtype == DType::Float16 || p.dtype == DType::BFloat16,
                  NotImplemented, op, "{} has no Vulkan kernel (float32, float16 and bfloat16 do)",
                  dtype_name(p.dtype));
  int64_t rows = 0, elements = 0;
  KILN_CHECK(checked_mul(p.outer, p.inner, &rows) && checked_mul(rows, p.dim, &elements), op, "size overflow");
  if (elements == 0) return;
  const Binding out = bind_raw(p.out, p.dtype, elements, op);
  const Binding in = bind_raw(p.in, p.dtype, elements, op);
  struct {
    uint32_t rows, dim, inner, out_first, in_first;
  } push{static_cast<uint32_t>(rows), static_cast<uint32_t>(p.dim), static_cast<uint32_t>(p.inner), out.first,
         in.first};
  const uint32_t spec[] = {dtype_code(p.dtype), p.log ? 1u : 0u};
  const auto grid = grid_for(rows, 1, op);
  dispatch(op, "softmax", spec, {out, in}, &push, sizeof(push), grid[0], grid[1]);
}

const bool registered = [] {
  backend::SoftmaxKernels k;
  k.softmax = &softmax;
  backend::softmax_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
