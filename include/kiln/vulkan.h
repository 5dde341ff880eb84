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

class Tensor;

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

class VulkanEvent;

// A command stream of the Vulkan device, like torch.cuda.Stream. Work queued on one
// stream runs in order; work on different streams is unordered unless an event orders
// it (wait_event / wait_stream). Stream 0 is the default stream; `create()` hands out
// streams 1..31 in turn from a pool that lives as long as the process (PyTorch's pool
// of side streams works the same way), so a stream object is just its id.
// Today every stream submits to the device's first compute queue: they are ordered
// correctly, but do not yet run concurrently with each other.
class VulkanStream {
 public:
  static constexpr int kPoolSize = 32;
  static VulkanStream default_stream() { return VulkanStream(0); }
  static VulkanStream create();
  // The calling thread's current stream (the default one unless a VulkanStreamGuard says).
  static VulkanStream current();

  int id() const { return id_; }
  // Whether all work queued on the stream so far has finished (never waits).
  bool query() const;
  // Blocks until all work queued on the stream so far has finished.
  void synchronize() const;
  // Work queued on this stream from now on waits, on the device, for `event`'s point.
  void wait_event(const VulkanEvent& event) const;
  // The same for everything queued on `other` so far.
  void wait_stream(const VulkanStream& other) const;
  bool operator==(const VulkanStream& o) const { return id_ == o.id_; }

 private:
  explicit VulkanStream(int id) : id_(id) {}
  int id_ = 0;
};

// Makes `stream` the calling thread's current stream until it goes out of scope
// (`with kiln.vulkan.stream(s):`); guards nest.
class VulkanStreamGuard {
 public:
  explicit VulkanStreamGuard(const VulkanStream& stream);
  ~VulkanStreamGuard();
  VulkanStreamGuard(const VulkanStreamGuard&) = delete;
  VulkanStreamGuard& operator=(const VulkanStreamGuard&) = delete;

 private:
  int previous_;
};

// Tensor.record_stream: the device memory of `t` is in use by work queued on `stream`,
// so when `t`'s storage is freed the allocator reuses the block only after the work
// queued on `stream` by then has finished (a block is otherwise reused at once by
// later work of the stream that allocated it, which runs after its earlier readers).
void vulkan_record_stream(const Tensor& t, const VulkanStream& stream);

// A point in a stream, like torch.cuda.Event: record() marks it after everything queued
// so far on a stream (the current one by default) and submits that stream's open batch;
// query() says whether the device has passed it; synchronize() waits for it; wait()
// makes later work of a stream wait for it on the device; elapsed_time() is the device
// time between two recorded events in milliseconds, from timestamps the device writes
// (needs enable_timing on both).
class VulkanEvent {
 public:
  explicit VulkanEvent(bool enable_timing = false);
  ~VulkanEvent();
  VulkanEvent(const VulkanEvent&) = delete;
  VulkanEvent& operator=(const VulkanEvent&) = delete;

  void record();
  void record(const VulkanStream& stream);
  bool query() const;
  void synchronize() const;
  void wait() const { wait(VulkanStream::current()); }
  void wait(const VulkanStream& stream) const;
  double elapsed_time(const VulkanEvent& end) const;
  bool enable_timing() const { return timing_; }
  bool recorded() const { return recorded_; }
  int slot() const { return slot_; }

 private:
  int slot_ = -1;
  bool timing_ = false;
  bool recorded_ = false;
};

// Validation-layer errors seen so far (0 when the layer is off); tests assert none.
int64_t vulkan_validation_error_count();

}  // namespace kiln
