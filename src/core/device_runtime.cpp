// Device names, and the public Vulkan runtime calls routed to the backend when it is
// built (core/device_runtime.h).
#include "core/device_runtime.h"

#include <cstdlib>
#include <string>

#include "kiln/device.h"
#include "kiln/error.h"

namespace kiln {

Device device_from_string(const std::string& name) {
  const auto colon = name.find(':');
  const std::string type = name.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    const std::string digits = name.substr(colon + 1);
    const bool ok = !digits.empty() && digits.size() <= 4 && digits.find_first_not_of("0123456789") == std::string::npos;
    KILN_CHECK(ok, "device", "Invalid device string: '{}'", name);
    index = std::atoi(digits.c_str());
  }
  if (type == "cpu") {
    KILN_CHECK(index == 0, "device", "Invalid device string: '{}' (the CPU is device 0)", name);
    return kCPU;
  }
  if (type == "vulkan") return Device{DeviceType::Vulkan, index};
  if (type == "cuda") return Device{DeviceType::CUDA, index};
  fail(ErrorKind::Runtime, "device",
       "Expected one of cpu, cuda, vulkan device type at start of device string: {}", name);
}

VulkanAvailability vulkan_availability() {
  if (vulkan_probe != nullptr) return vulkan_probe();
  VulkanAvailability a;
  a.reason = "kiln was built without the Vulkan backend (KILN_VULKAN=OFF, or the Vulkan headers or glslc were "
             "missing when it was configured)";
  return a;
}

bool vulkan_is_available() { return vulkan_availability().usable; }

namespace {
const DeviceRuntime* vulkan_runtime() {
  return device_runtimes.has(DeviceType::Vulkan) ? &device_runtimes.on(kVulkan, "vulkan") : nullptr;
}
}  // namespace

void vulkan_synchronize() {
  if (const auto* r = vulkan_runtime()) r->synchronize();
}
VulkanQueueStats vulkan_queue_stats() {
  const auto* r = vulkan_runtime();
  return r != nullptr ? r->queue_stats() : VulkanQueueStats{};
}
AllocatorStats vulkan_memory_stats() {
  const auto* r = vulkan_runtime();
  return r != nullptr ? r->stats() : AllocatorStats{};
}
void vulkan_reset_peak_memory_stats() {
  if (const auto* r = vulkan_runtime()) r->reset_peak();
}
void vulkan_empty_cache() {
  if (const auto* r = vulkan_runtime()) r->empty_cache();
}
namespace {
const DeviceRuntime& event_runtime(const char* op) {
  const DeviceRuntime* r = vulkan_runtime();
  KILN_CHECK(r != nullptr, op, "{}", vulkan_availability().reason);
  return *r;
}
}  // namespace

VulkanEvent::VulkanEvent(bool enable_timing) : timing_(enable_timing) {
  slot_ = event_runtime("Event").event_create();
}
VulkanEvent::~VulkanEvent() {
  if (slot_ >= 0) vulkan_runtime()->event_destroy(slot_);
}
void VulkanEvent::record() {
  event_runtime("Event.record").event_record(slot_);
  recorded_ = true;
}
bool VulkanEvent::query() const { return !recorded_ || event_runtime("Event.query").event_query(slot_); }
void VulkanEvent::synchronize() const {
  if (recorded_) event_runtime("Event.synchronize").event_synchronize(slot_);
}
double VulkanEvent::elapsed_time(const VulkanEvent& end) const {
  const char* op = "elapsed_time";
  KILN_CHECK(timing_ && end.timing_, op, "Both events must be created with argument 'enable_timing=True'.");
  KILN_CHECK(recorded_ && end.recorded_, op, "Both events must be recorded before calculating elapsed time.");
  KILN_CHECK(query() && end.query(), op, "Both events must be completed before calculating elapsed time.");
  return event_runtime(op).event_elapsed_ms(slot_, end.slot_);
}

int64_t vulkan_validation_error_count() { return vulkan_validation_errors != nullptr ? vulkan_validation_errors() : 0; }

}  // namespace kiln
