#include "backend/vulkan/vk_recorder.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace kiln::vulkan {
namespace {

// Batches in flight before the host waits for the oldest.
constexpr size_t kRingSize = 8;

}  // namespace

Recorder::Recorder(Context& ctx) : ctx_(ctx) {
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
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &b.commands;
  check(vk.vkQueueSubmit(ctx_.queue, 1, &submit, b.fence), "vulkan", "vkQueueSubmit");
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

Recorder& recorder() {
  static auto* r = new Recorder(context("vulkan"));
  return *r;
}

void wait_for_device() {
  Recorder& r = recorder();
  auto lock = r.lock();
  r.wait_all();
}

}  // namespace kiln::vulkan
