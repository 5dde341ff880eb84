#include "runtime/vulkan_report.h"

#include "kiln/runtime.h"

namespace kiln {
namespace {

std::string device_line(const VulkanDeviceInfo& d) {
  std::string line = fmt::format("{} ({}, Vulkan {}, {})", d.name, d.type, d.api_version, d.driver);
  if (!d.missing.empty()) {
    line += "; lacks";
    for (size_t i = 0; i < d.missing.size(); ++i) line += (i == 0 ? " " : ", ") + d.missing[i];
  }
  return line;
}

std::string limits_line(const VulkanDeviceInfo& d) {
  return fmt::format(
      "subgroup {}, work group <= {} invocations, {} groups/dim, shared memory {}, storage binding <= {}, push "
      "constants {} B, offset alignment {} B, device-local heap {}, timestamp tick {} ns",
      d.subgroup_size, d.max_workgroup_invocations, d.max_workgroup_count_x,
      format_bytes(d.max_shared_memory_bytes), format_bytes(static_cast<int64_t>(d.max_storage_buffer_range)),
      d.max_push_constants_bytes, d.min_storage_buffer_offset_alignment,
      format_bytes(static_cast<int64_t>(d.device_local_bytes)), d.timestamp_period_ns);
}

}  // namespace

std::string format_vulkan_lines(const VulkanAvailability& v, const AllocatorStats& m) {
  std::string text = fmt::format("{:<14}{}{}\n", "Vulkan", v.usable ? "usable: " : "not usable: ", v.reason);
  for (size_t i = 0; i < v.devices.size(); ++i) {
    const bool selected = static_cast<int>(i) == v.selected;
    text += fmt::format("{:<14}device {}{}: {}\n", "", i, selected ? " (used)" : "", device_line(v.devices[i]));
    text += fmt::format("{:<14}  {}\n", "", limits_line(v.devices[i]));
  }
  if (v.usable) {
    text += fmt::format("{:<14}validation layer {}; device memory allocated {} (peak {}), reserved {}\n", "",
                        v.validation ? "on" : "off (KILN_VULKAN_VALIDATION=1 turns it on)",
                        format_bytes(m.allocated_bytes), format_bytes(m.peak_allocated_bytes),
                        format_bytes(m.reserved_bytes));
  }
  return text;
}

nlohmann::json vulkan_json(const VulkanAvailability& v, const AllocatorStats& m) {
  nlohmann::json devices = nlohmann::json::array();
  for (const VulkanDeviceInfo& d : v.devices) {
    devices.push_back({{"name", d.name},
                       {"type", d.type},
                       {"api_version", d.api_version},
                       {"driver", d.driver},
                       {"missing", d.missing},
                       {"max_storage_buffer_range", d.max_storage_buffer_range},
                       {"max_workgroup_invocations", d.max_workgroup_invocations},
                       {"max_workgroup_count_x", d.max_workgroup_count_x},
                       {"max_shared_memory_bytes", d.max_shared_memory_bytes},
                       {"max_push_constants_bytes", d.max_push_constants_bytes},
                       {"subgroup_size", d.subgroup_size},
                       {"min_storage_buffer_offset_alignment", d.min_storage_buffer_offset_alignment},
                       {"device_local_bytes", d.device_local_bytes},
                       {"timestamp_period_ns", d.timestamp_period_ns}});
  }
  return {{"built_with_vulkan", v.built_with_vulkan},
          {"usable", v.usable},
          {"reason", v.reason},
          {"selected", v.selected},
          {"validation", v.validation},
          {"devices", devices},
          {"memory",
           {{"allocated_bytes", m.allocated_bytes},
            {"peak_allocated_bytes", m.peak_allocated_bytes},
            {"reserved_bytes", m.reserved_bytes},
            {"num_allocs", m.num_allocs},
            {"num_cache_hits", m.num_cache_hits}}}};
}

std::string vulkan_report_json() { return vulkan_json(vulkan_availability(), vulkan_memory_stats()).dump(); }

}  // namespace kiln
