// Device names, and the public Vulkan runtime calls routed to the backend when it is
// built (core/device_runtime.h).
#include "core/device_runtime.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "kiln/device.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

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

namespace {
thread_local int current_stream = 0;
std::atomic<int> next_side_stream{0};
}  // namespace

int current_vulkan_stream() { return current_stream; }

VulkanStream VulkanStream::create() {
  // Round robin over the side streams 1 .. kPoolSize - 1, as PyTorch's stream pool.
  return VulkanStream(1 + next_side_stream.fetch_add(1, std::memory_order_relaxed) % (kPoolSize - 1));
}
VulkanStream VulkanStream::current() { return VulkanStream(current_stream); }
bool VulkanStream::query() const { return event_runtime("Stream.query").stream_query(id_); }
void VulkanStream::synchronize() const { event_runtime("Stream.synchronize").stream_synchronize(id_); }
void VulkanStream::wait_event(const VulkanEvent& event) const { event.wait(*this); }
void VulkanStream::wait_stream(const VulkanStream& other) const {
  if (other == *this) return;
  VulkanEvent mark;
  mark.record(other);
  mark.wait(*this);
}

VulkanStreamGuard::VulkanStreamGuard(const VulkanStream& stream) : previous_(current_stream) {
  current_stream = stream.id();
}
VulkanStreamGuard::~VulkanStreamGuard() { current_stream = previous_; }

void vulkan_record_stream(const Tensor& t, const VulkanStream& stream) {
  const char* op = "record_stream";
  KILN_CHECK(t.device().type == DeviceType::Vulkan, op, "expected a tensor on vulkan:0, got one on {}",
             t.device().str());
  if (t.storage()->data == nullptr) return;  // nothing allocated (an empty tensor)
  event_runtime(op).record_stream(t.storage()->data, stream.id());
}

VulkanEvent::VulkanEvent(bool enable_timing) : timing_(enable_timing) {
  slot_ = event_runtime("Event").event_create();
}
VulkanEvent::~VulkanEvent() {
  if (slot_ >= 0) vulkan_runtime()->event_destroy(slot_);
}
void VulkanEvent::record() { record(VulkanStream::current()); }
void VulkanEvent::record(const VulkanStream& stream) {
  event_runtime("Event.record").event_record(slot_, stream.id());
  recorded_ = true;
}
// An event never recorded is a point already passed: waiting for it does nothing (PyTorch).
void VulkanEvent::wait(const VulkanStream& stream) const {
  if (recorded_) event_runtime("Event.wait").event_wait(slot_, stream.id());
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
