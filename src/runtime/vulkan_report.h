// The Vulkan part of `kiln doctor` (internal to the runtime layer).
#pragma once

#include <fmt/core.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/allocator.h"
#include "kiln/vulkan.h"

namespace kiln {

// "1.5 GiB", "12.0 KiB", "17 B".
inline std::string format_bytes(int64_t bytes) {
  const double value = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.1f} GiB", value / (1 << 30));
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", value / (1 << 20));
  if (bytes >= (int64_t{1} << 10)) return fmt::format("{:.1f} KiB", value / (1 << 10));
  return fmt::format("{} B", bytes);
}

// The "Vulkan" lines of the text report: usable or why not, then every device with its
// limits (the one kiln uses marked), then the device pool's statistics.
std::string format_vulkan_lines(const VulkanAvailability& vulkan, const AllocatorStats& memory);
nlohmann::json vulkan_json(const VulkanAvailability& vulkan, const AllocatorStats& memory);

}  // namespace kiln
