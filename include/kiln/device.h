// Where a tensor lives. CPU today; CUDA when built with KILN_CUDA=ON.
#pragma once

#include <string>

namespace kiln {

enum class DeviceType { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  bool operator==(const Device&) const = default;
  std::string str() const { return type == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(index); }
};

inline constexpr Device kCPU{DeviceType::CPU, 0};

}  // namespace kiln
