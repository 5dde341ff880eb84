// Installs the CPU kernels of the gated_delta family.
#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "backend/gated_delta.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::GatedDeltaKernels k;
  k.causal_conv1d = causal_conv1d_cpu;
  k.gates = [](const ExecutionContext& ctx, const DeltaGatesProblem& p) { delta_gates_cpu(p, ctx.pool()); };
  k.rule = gated_delta_rule_cpu;
  k.rule_chunked = gated_delta_rule_chunked_cpu;
  k.delta_net_decode = delta_net_decode_cpu;
  backend::gated_delta_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
