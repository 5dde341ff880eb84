// Installs the CPU kernels of the pad family.
#include "backend/cpu/pad/pad_kernels.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::PadKernels k;
  k.constant = [](const ExecutionContext& ctx, const backend::ConstantPadProblem& p) { constant_pad(ctx.pool(), p); };
  backend::pad_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
