// Where a tensor lives. CPU today; CUDA when built with KILN_CUDA=ON.
#pragma once

#include <string>

namespace kiln {

enum class DeviceType { CPU, CUDA };
// Kernel tables keep one slot per device type.
inline constexpr int kDeviceTypeCount = 2;

inline const char* device_type_name(DeviceType t) { return t == DeviceType::CPU ? "cpu" : "cuda"; }

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  bool operator==(const Device&) const = default;
  std::string str() const { return type == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(index); }
};

inline constexpr Device kCPU{DeviceType::CPU, 0};

}  // namespace kiln
