#include "backend/vulkan/vk_memory.h"

#include <sys/mman.h>

#include <algorithm>

#include "backend/vulkan/vk_recorder.h"
#include "core/device_runtime.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

constexpr size_t kSmallRounding = 256;
constexpr size_t kLargeThreshold = size_t{1} << 20;
constexpr size_t kLargeRounding = size_t{64} << 10;
// Blocks from this size up get a chunk of their own; smaller ones share 32 MiB chunks.
constexpr size_t kOwnChunkBytes = size_t{4} << 20;
constexpr size_t kSharedChunkBytes = size_t{32} << 20;

size_t round_size(size_t n) {
  const size_t r = n < kLargeThreshold ? kSmallRounding : kLargeRounding;
  return (n + r - 1) / r * r;
}

// The reserved range device addresses come from: inaccessible host address space, handed
// out front to back; ranges of destroyed chunks are kept and handed out again (best fit,
// the rest split off), so making and freeing chunks never runs the range dry.
class AddressSpace {
 public:
  char* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (base_ == nullptr) {
      for (size_t size = size_t{1} << 40; size >= (size_t{1} << 32) && base_ == nullptr; size /= 4) {
        void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
          base_ = static_cast<char*>(p);
          size_ = size;
        }
      }
      if (base_ == nullptr) return nullptr;
    }
    const size_t aligned = page_round(bytes);
    if (auto it = returned_.lower_bound(aligned); it != returned_.end()) {
      const size_t size = it->first;
      char* p = it->second;
      returned_.erase(it);
      if (size > aligned) returned_.emplace(size - aligned, p + aligned);
      return p;
    }
    if (size_ - used_ < aligned) return nullptr;
    char* p = base_ + used_;
    used_ += aligned;
    return p;
  }

  // A range from take(bytes) that is no longer used.
  void give_back(char* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      returned_.emplace(page_round(bytes), p);
    } catch (const std::bad_alloc&) {
      // Runs while freeing memory: a range the list cannot take is simply not reused.
    }
  }

 private:
  static size_t page_round(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

  std::mutex mutex_;
  char* base_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
  std::multimap<size_t, char*> returned_;  // by size
};

AddressSpace& address_space() {
  static auto* a = new AddressSpace();
  return *a;
}

}  // namespace

MemoryPool::MemoryPool(Context& ctx, Kind kind) : ctx_(ctx), kind_(kind), free_(VulkanStream::kPoolSize) {
  // The memory types a storage/transfer buffer may use, from a probe buffer.
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = 4096;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer probe;
  check(vk.vkCreateBuffer(ctx.device, &info, nullptr, &probe), "vulkan", "vkCreateBuffer");
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(ctx.device, probe, &req);
  vk.vkDestroyBuffer(ctx.device, probe, nullptr);

  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // Device: device-local (any); staging: host-visible and coherent, cached preferred
  // (downloads read it).
  const VkMemoryPropertyFlags required = kind == Kind::Device ? VkMemoryPropertyFlags{0} : host;
  const VkMemoryPropertyFlags preferred =
      kind == Kind::Device ? VkMemoryPropertyFlags{VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT}
                           : host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  int chosen = -1;
  for (int pass = 0; pass < 2 && chosen < 0; ++pass) {
    for (uint32_t i = 0; i < ctx.memory.memoryTypeCount; ++i) {
      const VkMemoryPropertyFlags f = ctx.memory.memoryTypes[i].propertyFlags;
      const VkMemoryPropertyFlags want = pass == 0 ? (required | preferred) : required;
      if ((req.memoryTypeBits & (1u << i)) && (f & want) == want) {
        chosen = static_cast<int>(i);
        break;
      }
    }
  }
  KILN_CHECK(chosen >= 0, "vulkan", "the device has no {} memory type for storage buffers",
             kind == Kind::Device ? "device" : "host-visible");
  memory_type_ = static_cast<uint32_t>(chosen);
  alignment_ = std::max<size_t>({kSmallRounding, req.alignment,
                                 static_cast<size_t>(ctx.properties.limits.minStorageBufferOffsetAlignment)});
  // A shared chunk is bound whole, so it stays within the largest storage binding.
  shared_chunk_bytes_ = std::min<size_t>(kSharedChunkBytes, ctx.properties.limits.maxStorageBufferRange);
}

MemoryPool::Chunk* MemoryPool::new_chunk(size_t size, bool shared) {
  auto chunk = std::make_unique<Chunk>();
  chunk->size = size;
  chunk->shared = shared;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = size;
  alloc.memoryTypeIndex = memory_type_;
  if (vk.vkAllocateMemory(ctx_.device, &alloc, nullptr, &chunk->memory) != VK_SUCCESS) return nullptr;
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = size;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  bool ok = vk.vkCreateBuffer(ctx_.device, &info, nullptr, &chunk->buffer) == VK_SUCCESS;
  ok = ok && vk.vkBindBufferMemory(ctx_.device, chunk->buffer, chunk->memory, 0) == VK_SUCCESS;
  // The address comes last, so a refused allocation does not use up the range.
  if (ok) {
    chunk->address = address_space().take(size);
    ok = chunk->address != nullptr;
  }
  if (ok && kind_ == Kind::Staging) {
    void* mapped = nullptr;
    ok = vk.vkMapMemory(ctx_.device, chunk->memory, 0, VK_WHOLE_SIZE, 0, &mapped) == VK_SUCCESS;
    chunk->mapped = static_cast<char*>(mapped);
  }
  if (!ok) {
    destroy_chunk(chunk.get());
    return nullptr;
  }
  Chunk* raw = chunk.get();
  chunks_.emplace(reinterpret_cast<uintptr_t>(raw->address), std::move(chunk));
  stats_.reserved_bytes += static_cast<int64_t>(size);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  if (shared) stats_.arena_bytes += static_cast<int64_t>(size);
  return raw;
}

void MemoryPool::destroy_chunk(Chunk* chunk) {
  if (chunk->address != nullptr) address_space().give_back(chunk->address, chunk->size);
  if (chunk->buffer != VK_NULL_HANDLE) vk.vkDestroyBuffer(ctx_.device, chunk->buffer, nullptr);
  if (chunk->memory != VK_NULL_HANDLE) vk.vkFreeMemory(ctx_.device, chunk->memory, nullptr);
}

void* MemoryPool::carve(size_t size) {
  if (current_ == nullptr || current_->size - current_->carved < size) {
    Chunk* fresh = new_chunk(shared_chunk_bytes_, true);
    if (fresh == nullptr) return nullptr;
    // The full chunk's rest serves smaller requests from the free list.
    if (current_ != nullptr && current_->carved < current_->size) {
      free_list(0).emplace(current_->size - current_->carved,
                           std::make_pair(current_->address + current_->carved, current_));
      current_->carved = current_->size;
    }
    current_ = fresh;
  }
  char* p = current_->address + current_->carved;
  current_->carved += size;
  return p;
}

void* MemoryPool::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  size_t size = round_size(nbytes);
  size = (size + alignment_ - 1) / alignment_ * alignment_;
  ++stats_.num_allocs;
  if (!pending_.empty()) collect_pending();
  const int stream = kind_ == Kind::Device ? current_vulkan_stream() : 0;
  FreeList& list = free_list(stream);
  // Best fit, never much bigger than asked (as the CPU allocator).
  auto it = list.lower_bound(size);
  const size_t max_block = size < kLargeThreshold ? 2 * size : size + size / 8;
  char* p = nullptr;
  Block block{size, nullptr, stream};
  if (it != list.end() && it->first <= max_block) {
    p = it->second.first;
    block = Block{it->first, it->second.second, stream};
    list.erase(it);
    ++stats_.num_cache_hits;
  } else if (size < kOwnChunkBytes && size <= shared_chunk_bytes_) {
    p = static_cast<char*>(carve(size));
    if (p != nullptr) block.chunk = current_;
  } else {
    Chunk* own = new_chunk(size, false);
    if (own != nullptr) {
      p = own->address;
      block.chunk = own;
    }
  }
  if (p == nullptr) {
    --stats_.num_allocs;
    return nullptr;
  }
  live_.emplace(p, block);
  ++block.chunk->blocks_in_use;
  stats_.allocated_bytes += static_cast<int64_t>(block.size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return p;
}

void MemoryPool::free(void* address) {
  if (address == nullptr) return;
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = live_.find(static_cast<char*>(address));
  if (it == live_.end()) return;
  const Block block = it->second;
  live_.erase(it);
  stats_.allocated_bytes -= static_cast<int64_t>(block.size);
  // Runs in destructors: on any failure below the block stays unused in its chunk (its
  // chunk then stays reserved), which is safe.
  try {
    if (block.other_uses == 0) {
      --block.chunk->blocks_in_use;
      free_list(block.stream).emplace(block.size, std::make_pair(static_cast<char*>(address), block.chunk));
      return;
    }
    // The other streams' queued work may still read it: note how far each has submitted
    // (the recorders' locks are taken outside the pool's, the order allocate() uses).
    lock.unlock();
    Pending pending{static_cast<char*>(address), block, {}};
    for (int s = 0; s < VulkanStream::kPoolSize; ++s) {
      if (!(block.other_uses & (1u << s))) continue;
      Recorder& r = recorder_of(s);
      auto recording = r.lock();
      r.flush();
      pending.marks.emplace_back(s, r.last_submitted());
    }
    lock.lock();
    pending_.push_back(std::move(pending));
  } catch (...) {
  }
}

void MemoryPool::record_stream(const void* address, int stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(static_cast<char*>(const_cast<void*>(address)));
  KILN_CHECK(it != live_.end(), "record_stream", "the tensor's memory is not a live Vulkan allocation");
  if (stream != it->second.stream) it->second.other_uses |= 1u << stream;
}

void MemoryPool::collect_pending() {
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    bool done = true;
    for (const auto& [stream, serial] : p.marks) {
      Recorder& r = recorder_of(stream);
      auto recording = r.lock();
      done = done && r.is_complete(serial);
    }
    if (!done) {
      ++i;
      continue;
    }
    --p.block.chunk->blocks_in_use;
    free_list(p.block.stream).emplace(p.block.size, std::make_pair(p.address, p.block.chunk));
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
}

BufferSpan MemoryPool::resolve(const void* address, const char* op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto a = reinterpret_cast<uintptr_t>(address);
  auto it = chunks_.upper_bound(a);
  KILN_CHECK(it != chunks_.begin(), op, "the tensor's memory is not Vulkan device memory");
  --it;
  const Chunk& c = *it->second;
  KILN_CHECK(a < it->first + c.size, op, "the tensor's memory is not Vulkan device memory");
  const VkDeviceSize offset = a - it->first;
  return BufferSpan{c.buffer, offset, c.size - offset, c.mapped != nullptr ? c.mapped + offset : nullptr};
}

AllocatorStats MemoryPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void MemoryPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void MemoryPool::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  collect_pending();
  for (FreeList& list : free_) {
    for (auto it = list.begin(); it != list.end();) {
      if (it->second.second->blocks_in_use > 0) {
        ++it;
      } else {
        it = list.erase(it);
      }
    }
  }
  for (auto it = chunks_.begin(); it != chunks_.end();) {
    Chunk* c = it->second.get();
    if (c->blocks_in_use > 0) {
      ++it;
      continue;
    }
    destroy_chunk(c);
    stats_.reserved_bytes -= static_cast<int64_t>(c->size);
    if (c->shared) stats_.arena_bytes -= static_cast<int64_t>(c->size);
    if (current_ == c) current_ = nullptr;
    it = chunks_.erase(it);
  }
}

void* allocate_or_wait(MemoryPool& pool, size_t nbytes) {
  void* p = pool.allocate(nbytes);
  if (p != nullptr || nbytes == 0) return p;
  // Cached blocks may still be read by queued work: wait before giving them back.
  wait_for_device();
  pool.empty_cache();
  return pool.allocate(nbytes);
}

MemoryPool& device_pool() {
  static auto* pool = new MemoryPool(context("vulkan"), MemoryPool::Kind::Device);
  return *pool;
}

MemoryPool& staging_pool() {
  static auto* pool = new MemoryPool(context("vulkan"), MemoryPool::Kind::Staging);
  return *pool;
}

}  // namespace kiln::vulkan
