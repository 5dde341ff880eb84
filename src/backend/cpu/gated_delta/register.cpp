// Installs the CPU kernels of the gated_delta family.
#include "backend/cpu/gated_delta/gated_delta_kernels.h"
#include "backend/gated_delta.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::GatedDeltaKernels k;
  k.causal_conv1d = [](const ExecutionContext& ctx, const CausalConv1dProblem& p) { causal_conv1d_cpu(p, ctx.pool()); };
  k.gates = [](const ExecutionContext& ctx, const DeltaGatesProblem& p) { delta_gates_cpu(p, ctx.pool()); };
  k.rule = [](const ExecutionContext& ctx, const GatedDeltaRuleProblem& p) { gated_delta_rule_cpu(p, ctx.pool()); };
  k.rule_chunked = gated_delta_rule_chunked_cpu;
  backend::gated_delta_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
