#include "backend/vulkan/vk_device.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

std::atomic<int64_t> g_validation_errors{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT,
                                                     const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    ++g_validation_errors;
    std::fprintf(stderr, "kiln: Vulkan validation error: %s\n", data->pMessage);
  }
  return VK_FALSE;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

std::string version_string(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

// Lower is preferred: discrete first, lavapipe (a CPU device) last.
int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name) {
  return std::any_of(list.begin(), list.end(),
                     [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice d) {
  uint32_t n = 0;
  vk.vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> list(n);
  vk.vkEnumerateDeviceExtensionProperties(d, nullptr, &n, list.data());
  list.resize(n);
  return list;
}

// A compute-capable queue family, preferring one without graphics (a dedicated compute
// queue); -1 when there is none.
int compute_family(VkPhysicalDevice d) {
  uint32_t n = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(d, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(d, &n, families.data());
  int best = -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = static_cast<int>(i);
    if (!(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) break;
  }
  return best;
}

// What kiln knows of a device, and what it lacks of what kiln's kernels need.
VulkanDeviceInfo describe(VkPhysicalDevice d) {
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceFloatControlsProperties float_controls{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
  subgroup.pNext = &driver;
  driver.pNext = &float_controls;
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  vk.vkGetPhysicalDeviceProperties2(d, &props);
  const VkPhysicalDeviceProperties& p = props.properties;

  VulkanDeviceInfo info;
  info.name = p.deviceName;
  info.type = type_name(p.deviceType);
  info.api_version = version_string(p.apiVersion);
  info.driver = fmt::format("{}: {}", driver.driverName, driver.driverInfo);
  info.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  info.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  info.max_workgroup_count_x = p.limits.maxComputeWorkGroupCount[0];
  info.max_shared_memory_bytes = p.limits.maxComputeSharedMemorySize;
  info.max_push_constants_bytes = p.limits.maxPushConstantsSize;
  info.subgroup_size = subgroup.subgroupSize;
  info.min_storage_buffer_offset_alignment = p.limits.minStorageBufferOffsetAlignment;
  info.timestamp_period_ns = p.limits.timestampPeriod;
  VkPhysicalDeviceMemoryProperties memory;
  vk.vkGetPhysicalDeviceMemoryProperties(d, &memory);
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i) {
    if (memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes = std::max<uint64_t>(info.device_local_bytes, memory.memoryHeaps[i].size);
  }

  // What the kernels use: 8/16-bit storage buffers (narrow dtypes), push descriptors
  // (no descriptor pools), subgroup arithmetic in compute shaders (reductions), and
  // 128 bytes of push constants (strides).
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &f11;
  const bool api12 = p.apiVersion >= VK_API_VERSION_1_2;
  if (api12) vk.vkGetPhysicalDeviceFeatures2(d, &features);
  auto& missing = info.missing;
  if (!api12) missing.push_back("Vulkan 1.2 (the device offers " + info.api_version + ")");
  if (compute_family(d) < 0) missing.push_back("a compute queue");
  if (api12 && !f11.storageBuffer16BitAccess) missing.push_back("storageBuffer16BitAccess");
  if (api12 && !f12.storageBuffer8BitAccess) missing.push_back("storageBuffer8BitAccess");
  if (api12 && !f12.timelineSemaphore) missing.push_back("timelineSemaphore");
  if (!has_extension(device_extensions(d), VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
    missing.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  const VkSubgroupFeatureFlags needed = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  if ((subgroup.supportedOperations & needed) != needed || !(subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT))
    missing.push_back("subgroup basic and arithmetic operations in compute shaders");
  if (p.limits.maxPushConstantsSize < 128) missing.push_back("128 bytes of push constants");
  // Every shader declares it, so that inf and NaN survive (MoltenVK's fast math otherwise).
  if (api12 && !float_controls.shaderSignedZeroInfNanPreserveFloat32)
    missing.push_back("shaderSignedZeroInfNanPreserveFloat32");
  return info;
}

struct State {
  VulkanAvailability report;
  Context ctx;
  std::vector<VkPhysicalDevice> physical;
};

bool layer_installed(const char* name) {
  uint32_t n = 0;
  if (vk.vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(n);
  vk.vkEnumerateInstanceLayerProperties(&n, layers.data());
  return std::any_of(layers.begin(), layers.begin() + n,
                     [&](const VkLayerProperties& l) { return std::strcmp(l.layerName, name) == 0; });
}

// Index into `devices` of the device to use, or -1 with `why` set.
int select_device(const std::vector<VulkanDeviceInfo>& devices, std::string& why) {
  if (const char* want = std::getenv("KILN_VULKAN_DEVICE"); want != nullptr && *want != '\0') {
    const std::string w = want;
    int chosen = -1;
    if (w.find_first_not_of("0123456789") == std::string::npos && w.size() < 4) {
      chosen = std::atoi(w.c_str());
      if (chosen >= static_cast<int>(devices.size())) {
        why = fmt::format("KILN_VULKAN_DEVICE={} but the loader lists {} device(s)", w, devices.size());
        return -1;
      }
    } else {
      for (size_t i = 0; i < devices.size() && chosen < 0; ++i) {
        if (devices[i].name.find(w) != std::string::npos) chosen = static_cast<int>(i);
      }
      if (chosen < 0) {
        why = fmt::format("KILN_VULKAN_DEVICE={} names none of the devices", w);
        return -1;
      }
    }
    if (!devices[chosen].missing.empty()) {
      why = fmt::format("KILN_VULKAN_DEVICE chose {} (device {}), which lacks {}", devices[chosen].name, chosen,
                        fmt::format("{}", fmt::join(devices[chosen].missing, ", ")));
      return -1;
    }
    return chosen;
  }
  int best = -1;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].missing.empty()) continue;
    if (best < 0) best = static_cast<int>(i);
  }
  if (best < 0) {
    why = "no Vulkan device has what kiln needs:";
    for (const auto& d : devices) why += fmt::format(" {} lacks {};", d.name, fmt::join(d.missing, ", "));
    why.pop_back();
  }
  return best;
}

bool create_device(State& s, int index, std::string& why) {
  Context& c = s.ctx;
  c.physical = s.physical[index];
  c.queue_family = static_cast<uint32_t>(compute_family(c.physical));
  vk.vkGetPhysicalDeviceProperties(c.physical, &c.properties);
  vk.vkGetPhysicalDeviceMemoryProperties(c.physical, &c.memory);
  c.subgroup_size = s.report.devices[index].subgroup_size;
  {
    uint32_t n = 0;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(c.physical, &n, nullptr);
    std::vector<VkQueueFamilyProperties> families(n);
    vk.vkGetPhysicalDeviceQueueFamilyProperties(c.physical, &n, families.data());
    c.timestamp_valid_bits = families[c.queue_family].timestampValidBits;
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = c.queue_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;

  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.storageBuffer16BitAccess = VK_TRUE;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.storageBuffer8BitAccess = VK_TRUE;
  f12.timelineSemaphore = VK_TRUE;  // streams wait on each other's (a Vulkan 1.2 core feature)
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &f11;

  std::vector<const char*> extensions{VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  // MoltenVK: a portability device must be created with its subset extension on.
  if (has_extension(device_extensions(c.physical), "VK_KHR_portability_subset"))
    extensions.push_back("VK_KHR_portability_subset");

  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &features;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  const VkResult r = vk.vkCreateDevice(c.physical, &info, nullptr, &c.device);
  if (r != VK_SUCCESS) {
    why = fmt::format("vkCreateDevice failed on {}: {}", c.properties.deviceName, result_name(r));
    return false;
  }
  if (!load_device_functions(c.device, why)) return false;
  vk.vkGetDeviceQueue(c.device, c.queue_family, 0, &c.queue);
  return true;
}

State probe_once() {
  State s;
  VulkanAvailability& a = s.report;
  a.built_with_vulkan = true;
  if (!load_loader(a.reason)) return s;

  uint32_t loader_version = VK_API_VERSION_1_0;
  if (vk.vkEnumerateInstanceVersion != nullptr) vk.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_2) {
    a.reason = "the Vulkan loader supports only API " + version_string(loader_version) + "; kiln needs 1.2";
    return s;
  }

  uint32_t n = 0;
  vk.vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> instance_extensions(n);
  vk.vkEnumerateInstanceExtensionProperties(nullptr, &n, instance_extensions.data());
  instance_extensions.resize(n);

  std::vector<const char*> extensions;
  std::vector<const char*> layers;
  VkInstanceCreateFlags flags = 0;
  // MoltenVK is listed only to instances that ask for portability devices.
  if (has_extension(instance_extensions, "VK_KHR_portability_enumeration")) {
    extensions.push_back("VK_KHR_portability_enumeration");
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  const char* kValidation = "VK_LAYER_KHRONOS_validation";
  if (env_flag("KILN_VULKAN_VALIDATION") && layer_installed(kValidation) &&
      has_extension(instance_extensions, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
    layers.push_back(kValidation);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    a.validation = true;
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "kiln";
  app.pEngineName = "kiln";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  Context& c = s.ctx;
  VkResult r = vk.vkCreateInstance(&info, nullptr, &c.instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    a.reason = "no Vulkan driver (ICD): the loader found no installable client driver (Debian: apt install "
               "mesa-vulkan-drivers for lavapipe; otherwise the GPU vendor's driver; VK_DRIVER_FILES names a "
               "driver manifest by hand)";
    return s;
  }
  if (r != VK_SUCCESS) {
    a.reason = fmt::format("vkCreateInstance failed: {}", result_name(r));
    return s;
  }
  if (!load_instance_functions(c.instance, a.reason)) return s;
  if (a.validation) {
    VkDebugUtilsMessengerCreateInfoEXT m{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
    m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT;
    m.pfnUserCallback = &on_validation_message;
    VkDebugUtilsMessengerEXT messenger;
    if (vk.vkCreateDebugUtilsMessengerEXT == nullptr ||
        vk.vkCreateDebugUtilsMessengerEXT(c.instance, &m, nullptr, &messenger) != VK_SUCCESS) {
      a.validation = false;
    }
  }

  n = 0;
  r = vk.vkEnumeratePhysicalDevices(c.instance, &n, nullptr);
  if (r != VK_SUCCESS || n == 0) {
    a.reason = r != VK_SUCCESS ? fmt::format("vkEnumeratePhysicalDevices failed: {}", result_name(r))
                               : "no Vulkan device: the drivers the loader found report none";
    return s;
  }
  s.physical.resize(n);
  vk.vkEnumeratePhysicalDevices(c.instance, &n, s.physical.data());
  s.physical.resize(n);
  for (VkPhysicalDevice d : s.physical) a.devices.push_back(describe(d));

  // Preference by type; stable, so the loader's order breaks ties.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    VkPhysicalDeviceProperties px, py;
    vk.vkGetPhysicalDeviceProperties(s.physical[x], &px);
    vk.vkGetPhysicalDeviceProperties(s.physical[y], &py);
    return type_rank(px.deviceType) < type_rank(py.deviceType);
  });
  std::vector<VulkanDeviceInfo> ranked;
  for (size_t i : order) ranked.push_back(a.devices[i]);
  const int pick = select_device(std::getenv("KILN_VULKAN_DEVICE") ? a.devices : ranked, a.reason);
  if (pick < 0) return s;
  const int index = std::getenv("KILN_VULKAN_DEVICE") ? pick : static_cast<int>(order[pick]);
  if (!create_device(s, index, a.reason)) return s;
  a.selected = index;
  a.usable = true;
  const VulkanDeviceInfo& d = a.devices[index];
  a.reason = fmt::format("{} ({}, Vulkan {}, {})", d.name, d.type, d.api_version, d.driver);
  return s;
}

State& state() {
  // Never destroyed: see the header.
  static State* s = new State(probe_once());
  return *s;
}

}  // namespace

const VulkanAvailability& availability() { return state().report; }

Context& context(const char* op) {
  State& s = state();
  KILN_CHECK(s.report.usable, op, "Vulkan is not usable: {}", s.report.reason);
  return s.ctx;
}

void check(VkResult r, const char* op, const char* what) {
  if (r == VK_SUCCESS) return;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    fail(ErrorKind::Runtime, op, "not enough memory on vulkan:0: {} failed ({})", what, result_name(r));
  fail(ErrorKind::Runtime, op, "{} failed on vulkan:0: {}", what, result_name(r));
}

int64_t validation_errors() { return g_validation_errors.load(); }

}  // namespace kiln::vulkan
