// Installs the Vulkan device's memory pool, queue and probe into core
// (core/device_runtime.h), so that Storage, kiln/vulkan.h and `kiln doctor` reach them.
#include "backend/vulkan/vk_events.h"
#include "backend/vulkan/vk_memory.h"
#include "backend/vulkan/vk_recorder.h"
#include "core/device_runtime.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

void* allocate(size_t nbytes, const char* op) {
  if (nbytes == 0) return nullptr;
  MemoryPool& pool = device_pool();
  void* p = allocate_or_wait(pool, nbytes);
  if (p == nullptr) {
    fail(ErrorKind::Runtime, op,
         "not enough memory: you tried to allocate {} bytes on vulkan:0 ({} bytes are allocated by kiln there now)",
         nbytes, pool.stats().allocated_bytes);
  }
  return p;
}

// Statistics and cache calls on a machine without a usable device report nothing.
bool device_created() { return availability().usable; }

const bool registered = [] {
  DeviceRuntime r;
  r.allocate = [](size_t nbytes, const char* op) -> void* {
    return allocate(nbytes, op);
  };
  r.free = [](void* p, size_t) { device_pool().free(p); };
  r.stats = [] { return device_created() ? device_pool().stats() : AllocatorStats{}; };
  r.reset_peak = [] {
    if (device_created()) device_pool().reset_peak();
  };
  r.empty_cache = [] {
    if (!device_created()) return;
    wait_for_device();
    device_pool().empty_cache();
    staging_pool().empty_cache();
  };
  r.synchronize = [] {
    if (device_created()) wait_for_device();
  };
  r.queue_stats = [] {
    VulkanQueueStats q;
    if (!device_created()) return q;
    q.batch_size = recorder_of(0).batch_size();
    for_each_recorder([&q](Recorder& rec) {
      auto lock = rec.lock();
      const RecorderStats s = rec.stats();
      q.commands += s.commands;
      q.submits += s.submits;
      q.waits += s.waits;
    });
    return q;
  };
  r.event_create = &event_create;
  r.event_destroy = &event_destroy;
  r.event_record = &event_record;
  r.event_query = &event_query;
  r.event_synchronize = &event_synchronize;
  r.event_elapsed_ms = &event_elapsed_ms;
  r.event_wait = &event_wait;
  r.stream_query = [](int stream) {
    if (!device_created()) return true;
    Recorder& rec = recorder_of(stream);
    auto lock = rec.lock();
    return rec.idle();
  };
  r.stream_synchronize = [](int stream) {
    if (!device_created()) return;
    Recorder& rec = recorder_of(stream);
    auto lock = rec.lock();
    rec.wait_all();
  };
  r.record_stream = [](const void* address, int stream) { device_pool().record_stream(address, stream); };
  device_runtimes.install(DeviceType::Vulkan, r);
  vulkan_probe = [] { return availability(); };
  vulkan_validation_errors = [] { return validation_errors(); };
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
