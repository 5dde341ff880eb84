// The Vulkan device as the rest of kiln sees it: whether it is usable and, if not,
// exactly why (`kiln doctor`), its memory statistics, and waiting for its work.
// Light header: no Vulkan headers. Works in every build: without KILN_VULKAN it reports
// that the backend was not built.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/allocator.h"

namespace kiln {

struct VulkanDeviceInfo {
  std::string name;         // "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;         // "discrete GPU", "integrated GPU", "CPU", ...
  std::string api_version;  // "1.3.230"
  std::string driver;       // "llvmpipe: Mesa 22.3.6 (LLVM 15.0.6)"
  std::vector<std::string> missing;  // features kiln needs that the device lacks (empty: usable)
  // Limits kiln's kernels depend on.
  uint64_t max_storage_buffer_range = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_count_x = 0;
  uint32_t max_shared_memory_bytes = 0;
  uint32_t max_push_constants_bytes = 0;
  uint32_t subgroup_size = 0;
  uint64_t min_storage_buffer_offset_alignment = 0;
  uint64_t device_local_bytes = 0;  // the largest device-local heap
  float timestamp_period_ns = 0;
};

struct VulkanAvailability {
  bool built_with_vulkan = false;
  bool usable = false;
  // Why not usable (no loader, no driver, no device, missing features, ...), or a summary.
  std::string reason;
  std::vector<VulkanDeviceInfo> devices;  // every device the loader lists
  int selected = -1;                      // index into devices of the one kiln uses
  bool validation = false;                // the Khronos validation layer is on
};

// Probes the loader and devices once (creating the device kiln uses when one is usable);
// cached afterwards. Never throws.
VulkanAvailability vulkan_availability();
bool vulkan_is_available();
// Blocks until every kernel and copy queued on the Vulkan device has finished (no-op
// when the device was never used).
void vulkan_synchronize();
// The device memory pool's statistics, like allocator_stats() for the CPU.
AllocatorStats vulkan_memory_stats();
void vulkan_reset_peak_memory_stats();
void vulkan_empty_cache();
// What the command recorder did so far: kernels and copies recorded, command buffers
// submitted, and times the host waited for the device (a download, synchronize(), or a
// full ring of batches). The decode loop's budget: a wait only for the sampled token.
struct VulkanQueueStats {
  int64_t commands = 0;
  int64_t submits = 0;
  int64_t waits = 0;
  int batch_size = 0;  // commands per submit (KILN_VULKAN_BATCH, default 16)
};
VulkanQueueStats vulkan_queue_stats();

// A point in the device's command stream, like torch.cuda.Event: record() marks it after
// everything queued so far (and submits the open batch); query() says whether the device
// has passed it; synchronize() waits for it; elapsed_time() is the device time between
// two recorded events in milliseconds, from timestamps the device writes (needs
// enable_timing on both). kiln has one command stream per device today, so wait() (a
// device-side wait) has nothing to order and returns at once.
class VulkanEvent {
 public:
  explicit VulkanEvent(bool enable_timing = false);
  ~VulkanEvent();
  VulkanEvent(const VulkanEvent&) = delete;
  VulkanEvent& operator=(const VulkanEvent&) = delete;

  void record();
  bool query() const;
  void synchronize() const;
  void wait() const {}
  double elapsed_time(const VulkanEvent& end) const;
  bool enable_timing() const { return timing_; }

 private:
  int slot_ = -1;
  bool timing_ = false;
  bool recorded_ = false;
};

// Validation-layer errors seen so far (0 when the layer is off); tests assert none.
int64_t vulkan_validation_error_count();

}  // namespace kiln
