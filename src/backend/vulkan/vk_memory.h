// Device memory for tensors (internal): a caching allocator over vkAllocateMemory, with
// the CPU allocator's statistics (AllocatorStats).
//
// Blocks below kOwnChunkBytes are carved from shared chunks (one VkDeviceMemory and one
// VkBuffer each); bigger blocks get a chunk of their own. Freed blocks are cached for
// reuse. Every block has an address in a reserved, inaccessible range of the host's
// address space, so a device tensor's data_ptr() is unique, resolves to (buffer,
// offset) for binding, and faults at once if host code ever dereferences it.
//
// Reuse is safe without waiting: a freed block goes back to the free list of the stream
// it was allocated on (kiln/vulkan.h VulkanStream) and is handed out again only to that
// stream, whose later commands run after the earlier ones that read it (vk_recorder.h).
// A block that other streams use too (record_stream) waits in a pending list until the
// work those streams had queued when it was freed has finished. Staging blocks are freed
// only once their copy has run, so they have one free list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/vulkan/vk_device.h"
#include "kiln/allocator.h"

namespace kiln::vulkan {

// Where an address lives: the chunk's buffer, the byte offset in it, the bytes from
// there to the end of the buffer, and the host mapping (staging memory only).
struct BufferSpan {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize bytes_to_end = 0;
  char* mapped = nullptr;
};

class MemoryPool {
 public:
  enum class Kind { Device, Staging };
  MemoryPool(Context& ctx, Kind kind);
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // Null when the device refuses (the caller may release the cache and retry).
  void* allocate(size_t nbytes);
  void free(void* address);
  // The block holding `address` is also in use by `stream`'s queued work.
  void record_stream(const void* address, int stream);
  // Throws a kiln::Error naming `op` when the address is not a block of this pool.
  BufferSpan resolve(const void* address, const char* op) const;
  AllocatorStats stats() const;
  void reset_peak();
  // Returns every cached block whose chunk has no block in use to the device. The caller
  // must have waited for the queue first (a cached block may still be read by it).
  void empty_cache();

 private:
  struct Chunk {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkBuffer buffer = VK_NULL_HANDLE;
    size_t size = 0;
    char* address = nullptr;  // its range in the reserved address space
    char* mapped = nullptr;
    size_t carved = 0;        // shared chunks: bytes handed out so far, front to back
    int64_t blocks_in_use = 0;
    bool shared = false;
  };
  struct Block {
    size_t size;
    Chunk* chunk;
    int stream = 0;           // the stream it was allocated for
    uint32_t other_uses = 0;  // bit s: stream s uses it too (record_stream)
  };
  // A freed block other streams still use: reusable once each stream's recorder has
  // completed the serial it had submitted when the block was freed.
  struct Pending {
    char* address;
    Block block;
    std::vector<std::pair<int, uint64_t>> marks;  // (stream, serial)
  };

  Chunk* new_chunk(size_t size, bool shared);
  void destroy_chunk(Chunk* chunk);
  void* carve(size_t size);

  Context& ctx_;
  Kind kind_;
  uint32_t memory_type_ = 0;
  size_t alignment_ = 256;
  size_t shared_chunk_bytes_ = 0;
  mutable std::mutex mutex_;
  std::map<uintptr_t, std::unique_ptr<Chunk>> chunks_;  // by address
  using FreeList = std::multimap<size_t, std::pair<char*, Chunk*>>;
  FreeList& free_list(int stream) { return free_[kind_ == Kind::Device ? stream : 0]; }
  void collect_pending();  // with mutex_ held
  std::vector<FreeList> free_;  // per stream
  std::vector<Pending> pending_;
  std::unordered_map<char*, Block> live_;
  Chunk* current_ = nullptr;  // the shared chunk being carved
  AllocatorStats stats_;
};

// pool.allocate(nbytes); when the device refuses, waits for the queue, returns the
// pool's cached blocks to the device and tries once more. Null if it still refuses.
void* allocate_or_wait(MemoryPool& pool, size_t nbytes);

MemoryPool& device_pool();
MemoryPool& staging_pool();

}  // namespace kiln::vulkan
