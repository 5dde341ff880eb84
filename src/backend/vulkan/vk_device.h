// The Vulkan instance and the one device kiln uses (internal): created on first use,
// never destroyed (tensors in static objects may be freed after main returns).
//
// Selection: KILN_VULKAN_DEVICE (an index into the loader's list, or part of a device
// name) when set; otherwise the first usable discrete GPU, then integrated, virtual and
// finally CPU devices (lavapipe is the fallback that makes every machine a test machine).
// KILN_VULKAN_VALIDATION=1 turns the Khronos validation layer on when it is installed;
// its errors are printed and counted (vulkan_validation_error_count()).
#pragma once

#include <cstdint>
#include <string>

#include "backend/vulkan/vk_loader.h"
#include "kiln/vulkan.h"

namespace kiln::vulkan {

struct Context {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceProperties properties{};
  VkPhysicalDeviceMemoryProperties memory{};
  uint32_t subgroup_size = 0;
  uint32_t timestamp_valid_bits = 0;  // of the queue kiln uses; 0: no timestamps
};

// The probe's result (cached; creates the device when one is usable). Never throws.
const VulkanAvailability& availability();
// The device, or a kiln::Error naming `op` that says why Vulkan is unusable.
Context& context(const char* op);
// Throws a kiln::Error naming `op` and `what` unless r is VK_SUCCESS.
void check(VkResult r, const char* op, const char* what);
int64_t validation_errors();

}  // namespace kiln::vulkan
