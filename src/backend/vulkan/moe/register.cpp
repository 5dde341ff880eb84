// Installs the Vulkan kernels of the moe family: routing and the fused expert block.
// moe_permute (a host-side counting sort feeding grouped_mm) has no Vulkan kernel yet.
#include "backend/moe.h"
#include "backend/vulkan/moe/moe_vulkan.h"
#include "backend/vulkan/vk_kernels.h"

namespace kiln::vulkan {
namespace {

const bool registered = [] {
  backend::MoeKernels k;
  k.route = &moe_route;
  k.permute = [](const ExecutionContext&, const backend::MoePermuteArgs&) { missing_kernel("moe_permute"); };
  k.experts = &moe_experts;
  backend::moe_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
