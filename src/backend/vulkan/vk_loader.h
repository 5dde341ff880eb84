// The Vulkan loader, opened at run time (dlopen) rather than linked, so that kiln runs
// its CPU path on a machine without it and `kiln doctor` can say that it is missing.
// Every Vulkan call kiln makes goes through the function table below.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace kiln::vulkan {

#define KILN_VK_GLOBAL_FUNCTIONS(X)        \
  X(vkCreateInstance)                      \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkEnumerateInstanceLayerProperties)    \
  X(vkEnumerateInstanceVersion)

#define KILN_VK_INSTANCE_FUNCTIONS(X)        \
  X(vkDestroyInstance)                       \
  X(vkEnumeratePhysicalDevices)              \
  X(vkGetPhysicalDeviceProperties)           \
  X(vkGetPhysicalDeviceProperties2)          \
  X(vkGetPhysicalDeviceFeatures2)            \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)     \
  X(vkEnumerateDeviceExtensionProperties)    \
  X(vkCreateDevice)                          \
  X(vkGetDeviceProcAddr)

#define KILN_VK_DEVICE_FUNCTIONS(X)  \
  X(vkDestroyDevice)                 \
  X(vkGetDeviceQueue)                \
  X(vkAllocateMemory)                \
  X(vkFreeMemory)                    \
  X(vkMapMemory)                     \
  X(vkCreateBuffer)                  \
  X(vkDestroyBuffer)                 \
  X(vkGetBufferMemoryRequirements)   \
  X(vkBindBufferMemory)              \
  X(vkCreateShaderModule)            \
  X(vkDestroyShaderModule)           \
  X(vkCreateDescriptorSetLayout)     \
  X(vkDestroyDescriptorSetLayout)    \
  X(vkCreatePipelineLayout)          \
  X(vkDestroyPipelineLayout)         \
  X(vkCreateComputePipelines)        \
  X(vkDestroyPipeline)               \
  X(vkCreateCommandPool)             \
  X(vkDestroyCommandPool)            \
  X(vkAllocateCommandBuffers)        \
  X(vkResetCommandBuffer)            \
  X(vkBeginCommandBuffer)            \
  X(vkEndCommandBuffer)              \
  X(vkCmdBindPipeline)               \
  X(vkCmdPushDescriptorSetKHR)       \
  X(vkCmdPushConstants)              \
  X(vkCmdDispatch)                   \
  X(vkCmdPipelineBarrier)            \
  X(vkCmdCopyBuffer)                 \
  X(vkCmdFillBuffer)                 \
  X(vkQueueSubmit)                   \
  X(vkCreateFence)                   \
  X(vkDestroyFence)                  \
  X(vkWaitForFences)                 \
  X(vkResetFences)                   \
  X(vkGetFenceStatus)                \
  X(vkDeviceWaitIdle)                \
  X(vkCreateQueryPool)               \
  X(vkDestroyQueryPool)              \
  X(vkCmdResetQueryPool)             \
  X(vkCmdWriteTimestamp)             \
  X(vkGetQueryPoolResults)           \
  X(vkCreateSemaphore)

#define KILN_VK_DECLARE(name) PFN_##name name = nullptr;

// One process-wide table; the instance- and device-level entries are filled when the
// instance and device are created (vk_device.cpp).
struct Functions {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  KILN_VK_GLOBAL_FUNCTIONS(KILN_VK_DECLARE)
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_DECLARE)
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_DECLARE)
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;
};

inline Functions vk;

// Opens the loader and fills the global entries; false with `why` set when there is no
// loader (the library names tried are in the message).
bool load_loader(std::string& why);
// Fills the instance-level entries; false with the name of the first missing one.
bool load_instance_functions(VkInstance instance, std::string& why);
bool load_device_functions(VkDevice device, std::string& why);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and the like.
const char* result_name(VkResult r);

}  // namespace kiln::vulkan
