// Installs the CPU kernels of the nn families: softmax.
#include "backend/cpu/nn/softmax_kernels.h"
#include "backend/softmax.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::softmax_kernels.install(DeviceType::CPU, {[](const ExecutionContext& ctx, const SoftmaxProblem& p) {
                                     softmax_cpu(p, ctx.pool());
                                   }});
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
