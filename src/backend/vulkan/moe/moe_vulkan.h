// The Vulkan kernels of the moe family (internal; installed by register.cpp).
#pragma once

#include "backend/moe.h"

namespace kiln::vulkan {

void moe_route(const ExecutionContext& ctx, const backend::MoeRouteArgs& args);
void moe_experts(const ExecutionContext& ctx, const backend::MoeExpertsArgs& args);

}  // namespace kiln::vulkan
