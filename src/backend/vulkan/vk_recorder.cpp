#include "backend/vulkan/vk_recorder.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <limits>

#include "core/device_runtime.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

// Batches in flight before the host waits for the oldest: 32 x 16 commands covers a
// decode token of a few dozen layers, so the one wait per token is for the logits.
constexpr size_t kRingSize = 32;

}  // namespace

// vkQueueSubmit needs the queue externally synchronised; every stream's recorder uses it.
std::mutex& queue_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

Recorder::Recorder(Context& ctx, int stream) : ctx_(ctx), stream_(stream) {
  VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = 0;
  VkSemaphoreCreateInfo semaphore{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  semaphore.pNext = &type;
  check(vk.vkCreateSemaphore(ctx.device, &semaphore, nullptr, &timeline_), "vulkan", "vkCreateSemaphore");
  if (const char* n = std::getenv("KILN_VULKAN_BATCH"); n != nullptr && *n != '\0') set_batch_size(std::atoi(n));
  VkCommandPoolCreateInfo info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  info.queueFamilyIndex = ctx.queue_family;
  check(vk.vkCreateCommandPool(ctx.device, &info, nullptr, &pool_), "vulkan", "vkCreateCommandPool");
  batches_.resize(kRingSize);
  for (Batch& b : batches_) {
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool_;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    check(vk.vkAllocateCommandBuffers(ctx.device, &alloc, &b.commands), "vulkan", "vkAllocateCommandBuffers");
    VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(vk.vkCreateFence(ctx.device, &fence, nullptr, &b.fence), "vulkan", "vkCreateFence");
  }
}

void Recorder::retire(Batch& b) {
  completed_ = std::max(completed_, b.serial);
  check(vk.vkResetFences(ctx_.device, 1, &b.fence), "vulkan", "vkResetFences");
  b.submitted = false;
  std::vector<std::function<void()>> done;
  done.swap(b.on_done);
  for (auto& release : done) release();
}

Recorder::Batch& Recorder::open_batch() {
  if (open_ != nullptr) return *open_;
  Batch& b = batches_[next_];
  next_ = (next_ + 1) % batches_.size();
  if (b.submitted) {
    // The ring is full: the oldest batch must finish before its buffer is reused.
    ++stats_.waits;
    check(vk.vkWaitForFences(ctx_.device, 1, &b.fence, VK_TRUE, std::numeric_limits<uint64_t>::max()), "vulkan",
          "vkWaitForFences");
    retire(b);
  }
  check(vk.vkResetCommandBuffer(b.commands, 0), "vulkan", "vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vk.vkBeginCommandBuffer(b.commands, &begin), "vulkan", "vkBeginCommandBuffer");
  open_ = &b;
  recorded_in_open_ = 0;
  return b;
}

VkCommandBuffer Recorder::begin_command() {
  Batch& b = open_batch();
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                          VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vk.vkCmdPipelineBarrier(b.commands, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
  return b.commands;
}

void Recorder::end_command() {
  ++stats_.commands;
  if (++recorded_in_open_ >= batch_size_) flush();
}

void Recorder::on_done(std::function<void()> release) { open_batch().on_done.push_back(std::move(release)); }

void Recorder::flush() {
  if (open_ == nullptr) return;
  Batch& b = *open_;
  open_ = nullptr;
  // Device writes become visible to the host once the fence is waited on.
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk.vkCmdPipelineBarrier(b.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
  check(vk.vkEndCommandBuffer(b.commands), "vulkan", "vkEndCommandBuffer");
  const uint64_t serial = submitted_ + 1;
  std::vector<VkSemaphore> wait_semaphores;
  std::vector<uint64_t> wait_values;
  for (const auto& [semaphore, value] : waits_) {
    wait_semaphores.push_back(semaphore);
    wait_values.push_back(value);
  }
  const std::vector<VkPipelineStageFlags> wait_stages(waits_.size(), VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  VkTimelineSemaphoreSubmitInfo timeline{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  timeline.waitSemaphoreValueCount = static_cast<uint32_t>(wait_values.size());
  timeline.pWaitSemaphoreValues = wait_values.data();
  timeline.signalSemaphoreValueCount = 1;
  timeline.pSignalSemaphoreValues = &serial;
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.pNext = &timeline;
  submit.waitSemaphoreCount = static_cast<uint32_t>(wait_semaphores.size());
  submit.pWaitSemaphores = wait_semaphores.data();
  submit.pWaitDstStageMask = wait_stages.data();
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &b.commands;
  submit.signalSemaphoreCount = 1;
  submit.pSignalSemaphores = &timeline_;
  {
    std::lock_guard<std::mutex> queue(queue_mutex());
    check(vk.vkQueueSubmit(ctx_.queue, 1, &submit, b.fence), "vulkan", "vkQueueSubmit");
  }
  waits_.clear();
  b.submitted = true;
  b.serial = ++submitted_;
  ++stats_.submits;
}

void Recorder::wait_all() {
  flush();
  bool waited = false;
  for (Batch& b : batches_) {
    if (!b.submitted) continue;
    waited = true;
    check(vk.vkWaitForFences(ctx_.device, 1, &b.fence, VK_TRUE, std::numeric_limits<uint64_t>::max()), "vulkan",
          "vkWaitForFences");
    retire(b);
  }
  if (waited) ++stats_.waits;
}

bool Recorder::is_complete(uint64_t serial) {
  if (serial <= completed_) return true;
  for (Batch& b : batches_) {
    if (b.submitted && vk.vkGetFenceStatus(ctx_.device, b.fence) == VK_SUCCESS) retire(b);
  }
  return serial <= completed_;
}

bool Recorder::idle() { return open_ == nullptr && is_complete(submitted_); }

void Recorder::wait_on(VkSemaphore semaphore, uint64_t value) {
  if (semaphore == timeline_) return;  // the stream's own earlier work: already ordered
  waits_.emplace_back(semaphore, value);
  // An empty batch carries the wait, so it holds even if nothing else is recorded.
  open_batch();
}

namespace {

struct Streams {
  std::mutex mutex;
  std::array<std::atomic<Recorder*>, VulkanStream::kPoolSize> recorders{};
};

Streams& streams() {
  static auto* s = new Streams();
  return *s;
}

}  // namespace

Recorder& recorder_of(int id) {
  KILN_CHECK(id >= 0 && id < VulkanStream::kPoolSize, "Stream", "stream id {} is not one of kiln's streams (0..{})",
             id, VulkanStream::kPoolSize - 1);
  Streams& s = streams();
  if (Recorder* r = s.recorders[id].load(std::memory_order_acquire)) return *r;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (Recorder* r = s.recorders[id].load(std::memory_order_acquire)) return *r;
  auto* r = new Recorder(context("vulkan"), id);
  s.recorders[id].store(r, std::memory_order_release);
  return *r;
}

Recorder& recorder() { return recorder_of(current_vulkan_stream()); }

void for_each_recorder(const std::function<void(Recorder&)>& f) {
  for (auto& slot : streams().recorders) {
    if (Recorder* r = slot.load(std::memory_order_acquire)) f(*r);
  }
}

void wait_for_device() {
  for_each_recorder([](Recorder& r) {
    auto lock = r.lock();
    r.wait_all();
  });
}

}  // namespace kiln::vulkan
