// Where a tensor lives: the CPU; a Vulkan device when built with KILN_VULKAN (the
// default when the Vulkan headers and glslc are present); CUDA when built with KILN_CUDA=ON.
#pragma once

#include <string>

namespace kiln {

enum class DeviceType { CPU, CUDA, Vulkan };
// Kernel tables keep one slot per device type.
inline constexpr int kDeviceTypeCount = 3;

inline const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Vulkan: return "vulkan";
  }
  return "unknown";
}

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  bool operator==(const Device&) const = default;
  std::string str() const {
    return type == DeviceType::CPU ? "cpu" : std::string(device_type_name(type)) + ":" + std::to_string(index);
  }
};

inline constexpr Device kCPU{DeviceType::CPU, 0};
inline constexpr Device kVulkan{DeviceType::Vulkan, 0};

// "cpu", "vulkan", "vulkan:0", "cuda:1" (PyTorch's spelling); a kiln::Error naming the
// string otherwise. Whether the device exists is checked when memory is allocated on it.
Device device_from_string(const std::string& name);

}  // namespace kiln
