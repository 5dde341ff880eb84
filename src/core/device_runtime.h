// What a device backend installs besides its kernels (internal): its memory pool and its
// queue, so that Storage and the public runtime calls (kiln/vulkan.h) reach the backend
// without core depending on it. Installed from the backend's static initialiser.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/allocator.h"
#include "kiln/vulkan.h"

namespace kiln {

struct DeviceRuntime {
  // Device memory: an address that identifies the block (it need not be dereferenceable
  // on the host); raises a kiln::Error naming `op` when the device cannot provide it.
  void* (*allocate)(size_t nbytes, const char* op) = nullptr;
  void (*free)(void* ptr, size_t nbytes) = nullptr;
  AllocatorStats (*stats)() = nullptr;
  void (*reset_peak)() = nullptr;
  void (*empty_cache)() = nullptr;
  void (*synchronize)() = nullptr;
  VulkanQueueStats (*queue_stats)() = nullptr;
  // Events (kiln/vulkan.h): a slot of the device's timestamp queries per live event.
  int (*event_create)() = nullptr;
  void (*event_destroy)(int slot) = nullptr;
  void (*event_record)(int slot, int stream) = nullptr;
  void (*event_wait)(int slot, int stream) = nullptr;
  bool (*event_query)(int slot) = nullptr;
  void (*event_synchronize)(int slot) = nullptr;
  double (*event_elapsed_ms)(int start, int end) = nullptr;
  // Streams (kiln/vulkan.h VulkanStream): ids 0 .. kPoolSize - 1.
  bool (*stream_query)(int stream) = nullptr;
  void (*stream_synchronize)(int stream) = nullptr;
  // The block at `address` (a device allocation) is in use by `stream`'s queued work.
  void (*record_stream)(const void* address, int stream) = nullptr;
};

// The calling thread's current Vulkan stream id (VulkanStreamGuard sets it); the backend
// records kernels and allocates memory for this stream.
int current_vulkan_stream();

inline KernelTable<DeviceRuntime> device_runtimes{"device runtime"};

// The Vulkan backend's probe and validation counter (null when it is not built).
inline VulkanAvailability (*vulkan_probe)() = nullptr;
inline int64_t (*vulkan_validation_errors)() = nullptr;

}  // namespace kiln
