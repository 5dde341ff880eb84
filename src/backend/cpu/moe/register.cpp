// Installs the CPU kernels of the moe family: routing, the token permutation and the
// fused expert block.
#include "backend/cpu/moe/moe_kernels.h"
#include "backend/moe.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::MoeKernels k;
  k.route = [](const ExecutionContext& ctx, const MoeRouteArgs& a) { moe_route(ctx.pool(), a); };
  k.permute = [](const ExecutionContext&, const MoePermuteArgs& a) { moe_permute(a); };
  k.experts = [](const ExecutionContext& ctx, const MoeExpertsArgs& a) { moe_experts(ctx.pool(), a); };
  backend::moe_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
