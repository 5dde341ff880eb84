// Installs the CPU copy kernels (Tensor::to / clone / contiguous / copy_ / item).
#include "backend/cpu/cast/cast.h"
#include "backend/cpu/common/loops.h"
#include "core/copy_kernels.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  CopyKernels k;
  k.copy = [](const ExecutionContext& ctx, const Tensor& dst, const Tensor& src) {
    copy_strided(ctx.pool(), dst, src);
  };
  k.cast_elements = &cast_strided;
  copy_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
