// The command recorder (internal): kernels and copies are recorded into a command buffer
// and submitted every `batch_size` commands (KILN_VULKAN_BATCH, default 16) without
// waiting, so the device runs one batch while the host records the next. The host waits
// only when it needs data: a download, synchronize(), or a full ring of batches.
//
// Every command is preceded by a full compute/transfer barrier, which orders it after
// everything recorded before it, in this batch or an earlier one (barriers reach back
// over the whole queue). That is what makes memory reuse without waiting safe
// (vk_memory.h); tracking real read/write overlaps is a later refinement.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "backend/vulkan/vk_device.h"

namespace kiln::vulkan {

struct RecorderStats {
  int64_t commands = 0;  // dispatches and copies recorded
  int64_t submits = 0;
  int64_t waits = 0;     // times the host waited for the device
};

// One recorder per stream (kiln/vulkan.h VulkanStream). Each submit also signals the
// recorder's timeline semaphore with the batch's serial, which is what another stream
// waits on (wait_on) for an event; submits of all streams share the queue under one lock.
class Recorder {
 public:
  Recorder(Context& ctx, int stream);

  // The lock every recording holds (commands of one op stay together).
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }

  // With lock() held: the open command buffer, after a barrier against everything before.
  VkCommandBuffer begin_command();
  // With lock() held: counts the command and submits the batch when it is full.
  void end_command();
  // With lock() held: runs `release` once the commands recorded so far have finished
  // (staging memory the host wrote for them).
  void on_done(std::function<void()> release);
  // With lock() held: submits the open batch (no wait).
  void flush();
  // With lock() held: submits and waits for every batch.
  void wait_all();

  // With lock() held: the serial of the last batch submitted (batches complete in
  // order: each command waits for everything before it), and whether the batch with
  // `serial` has completed (polls the fences without waiting).
  uint64_t last_submitted() const { return submitted_; }
  bool is_complete(uint64_t serial);
  // With lock() held: whether nothing is open and every submitted batch has completed.
  bool idle();
  // With lock() held: the next batch submitted waits, on the device, until `semaphore`
  // (another recorder's timeline) reaches `value`. The value must already be submitted.
  void wait_on(VkSemaphore semaphore, uint64_t value);
  VkSemaphore timeline() const { return timeline_; }
  int stream() const { return stream_; }

  RecorderStats stats() const { return stats_; }
  int batch_size() const { return batch_size_; }
  void set_batch_size(int n) { batch_size_ = n < 1 ? 1 : n; }

 private:
  struct Batch {
    VkCommandBuffer commands = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    std::vector<std::function<void()>> on_done;
    bool submitted = false;
    uint64_t serial = 0;
  };
  Batch& open_batch();
  void retire(Batch& b);  // after its fence signalled

  Context& ctx_;
  int stream_ = 0;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  std::vector<std::pair<VkSemaphore, uint64_t>> waits_;  // for the next submit
  std::mutex mutex_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::vector<Batch> batches_;  // a ring
  size_t next_ = 0;             // the batch to open next
  Batch* open_ = nullptr;
  int recorded_in_open_ = 0;
  int batch_size_ = 16;
  RecorderStats stats_;
  uint64_t submitted_ = 0;  // serial of the last batch submitted
  uint64_t completed_ = 0;  // every batch up to this serial has completed
};

// The calling thread's current stream's recorder (kiln/vulkan.h VulkanStreamGuard).
Recorder& recorder();
// Stream `id`'s recorder (0 .. VulkanStream::kPoolSize - 1), created on first use.
Recorder& recorder_of(int id);
// Calls f(recorder) for every recorder created so far.
void for_each_recorder(const std::function<void(Recorder&)>& f);
// Waits for every stream: takes each recorder's lock, submits what is open and waits
// for every batch.
void wait_for_device();

}  // namespace kiln::vulkan
