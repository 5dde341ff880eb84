// Caching allocator. Freed blocks go to a size-ordered free list and are handed out
// again for requests of a similar size, so steady-state op calls never touch the
// system allocator nor fault in fresh pages (~11 us per 4 KiB page on our machines).
//
// Where blocks come from:
//   - small (< 64 KiB): the system allocator, 64-byte aligned;
//   - medium (64 KiB to 4 MiB): carved one after another out of 32 MiB arenas that are
//     2 MiB aligned and advised MADV_HUGEPAGE, so that the many weights of this size a
//     model holds (MoE experts, k/v projections, FP8 matrices) sit in huge pages rather
//     than in separate 4 KiB-page allocations. Measured here: filling 300 MiB of fresh
//     1.5 MiB blocks took 0.28-0.43 s instead of 0.95 s (a fault per 2 MiB, not per
//     4 KiB); reading them back, the GEMV kernels ran no faster (their software prefetch
//     already hides the page walks), code without prefetch may;
//   - large (>= 4 MiB): a system allocation of their own, 2 MiB aligned and advised
//     MADV_HUGEPAGE.
// A freed medium block goes to the free list like any other; empty_cache() returns an
// arena to the system once none of its blocks is in use (an arena holding one long-lived
// tensor keeps its cached blocks: they stay reusable, but count as reserved).
//
// Under AddressSanitizer every block in the cache is poisoned and unpoisoned when it is
// handed out again: to ASan a cached block is still allocated memory (the cache holds
// it), so without this a read or write through a freed tensor would go unseen for as
// long as the block sat in the cache. Outside ASan builds the macros do nothing.
#include "kiln/allocator.h"

#include <sanitizer/asan_interface.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "kiln/error.h"

namespace kiln {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kSmallRounding = 512;
constexpr size_t kLargeThreshold = size_t{1} << 20;      // 1 MiB
// Large blocks round to 64 KiB: coarse enough that similar sizes share cached blocks,
// fine enough that many long-lived weights (a model quantised at load holds thousands of
// 1.5 MiB expert matrices) waste at most 4%.
constexpr size_t kLargeRounding = size_t{64} << 10;
constexpr size_t kHugePageThreshold = size_t{4} << 20;   // 4 MiB
constexpr size_t kHugePageAlignment = size_t{2} << 20;
// Blocks from kArenaMinBlock up to kHugePageThreshold come from arenas of kArenaBytes.
// Smaller blocks are left to the system allocator: they are scratch and small
// activations, for which a page-table walk per 4 KiB is no cost worth an arena's slack.
constexpr size_t kArenaMinBlock = size_t{64} << 10;      // 64 KiB
constexpr size_t kArenaBytes = size_t{32} << 20;         // 32 MiB: 8 blocks of the largest medium size

// For n <= kMaxAllocationBytes, so the rounding cannot wrap.
size_t round_size(size_t n) {
  size_t r = n < kLargeThreshold ? kSmallRounding : kLargeRounding;
  return (n + r - 1) / r * r;
}

bool is_medium(size_t size) { return size >= kArenaMinBlock && size < kHugePageThreshold; }

// A block entering the cache: any access through it is a use after free.
void poison_cached(void* p, size_t size) { ASAN_POISON_MEMORY_REGION(p, size); }
// A block leaving the cache for a caller, or going back to the system.
void unpoison(void* p, size_t size) { ASAN_UNPOISON_MEMORY_REGION(p, size); }

// A huge-page region that medium blocks are carved from, front to back.
struct Arena {
  char* base = nullptr;
  size_t used = 0;          // bytes carved so far
  int64_t blocks_in_use = 0;  // carved blocks handed out now (not in the free list)
};

// A block handed out or cached: its rounded size and the arena it was carved from, if any.
struct Block {
  size_t size = 0;
  Arena* arena = nullptr;
};

class CachingAllocator {
 public:
  void* allocate(size_t nbytes, const char* op) {
    if (nbytes == 0) return nullptr;
    if (nbytes > kMaxAllocationBytes) {
      fail(ErrorKind::Runtime, op, "not enough memory: you tried to allocate {} bytes, more than the {} bytes a "
           "single allocation can have", nbytes, kMaxAllocationBytes);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    void* p = nullptr;
    try {
      p = allocate_locked(round_size(nbytes));
    } catch (const std::bad_alloc&) {
      // The bookkeeping's own few bytes were refused: still kiln's out-of-memory error,
      // never a bare std::bad_alloc.
    }
    if (p == nullptr) {
      fail(ErrorKind::Runtime, op, "not enough memory: you tried to allocate {} bytes ({} bytes are allocated by "
           "kiln now)", nbytes, stats_.allocated_bytes);
    }
    return p;
  }

  void free(void* p) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) return;  // not ours; never happens through Storage
    const Block block = it->second;
    live_.erase(it);
    stats_.allocated_bytes -= static_cast<int64_t>(block.size);
    if (block.arena != nullptr) --block.arena->blocks_in_use;
    try {
      free_.emplace(block.size, std::make_pair(p, block.arena));
      poison_cached(p, block.size);
    } catch (const std::bad_alloc&) {
      // Runs in destructors, so it must not throw: a block the free list cannot take goes
      // back to the system (an arena's block stays with its arena, unused).
      if (block.arena == nullptr) {
        std::free(p);
        stats_.reserved_bytes -= static_cast<int64_t>(block.size);
      }
    }
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached_locked();
  }

 private:
  // A block of `size` (rounded) bytes, or null when the system refuses it even after the
  // cache is given back. When the bookkeeping throws std::bad_alloc, no block is lost.
  void* allocate_locked(size_t size) {
    ++stats_.num_allocs;
    // Best fit among cached blocks, but never much bigger than the request, so a tensor
    // cannot pin a block far larger than itself: up to twice a small request, up to
    // 1/8 more for a large one (whose slack would be megabytes, and which may live as
    // long as the model).
    auto it = free_.lower_bound(size);
    const size_t max_block = size < kLargeThreshold ? 2 * size : size + size / 8;
    if (it != free_.end() && it->first <= max_block) {
      void* p = it->second.first;
      const Block block{it->first, it->second.second};
      note_allocated(p, block);  // before the erase: if it throws, the block stays cached
      free_.erase(it);
      unpoison(p, block.size);
      ++stats_.num_cache_hits;
      return p;
    }
    Block block{size, nullptr};
    // A medium block whose arena the system refuses is tried on its own, as it was before
    // arenas; only then are cached blocks given back and everything tried once more.
    const auto obtain = [&]() -> void* {
      if (is_medium(size)) {
        if (void* q = carve(size, block.arena)) return q;
      }
      return system_allocate(size);
    };
    void* p = obtain();
    if (p == nullptr) {
      release_cached_locked();
      p = obtain();
    }
    if (p == nullptr) return nullptr;
    try {
      note_allocated(p, block);
    } catch (const std::bad_alloc&) {
      if (block.arena != nullptr) {
        block.arena->used -= size;  // the block was the arena's last carve
      } else {
        std::free(p);
      }
      throw;
    }
    if (block.arena == nullptr) add_reserved(static_cast<int64_t>(size));
    return p;
  }

  static void* system_allocate(size_t size) {
    size_t align = size >= kHugePageThreshold ? kHugePageAlignment : kAlignment;
    void* p = nullptr;
    if (posix_memalign(&p, align, size) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
    // Large weight and activation buffers are streamed: huge pages cut TLB misses.
    if (size >= kHugePageThreshold) madvise(p, size, MADV_HUGEPAGE);
#endif
    return p;
  }

  // A medium block from the current arena, or from a new one when it is full; the rest of
  // a full arena (too small for this request) goes to the free list for smaller ones.
  void* carve(size_t size, Arena*& arena) {
    if (current_ == nullptr || kArenaBytes - current_->used < size) {
      // The arena's bookkeeping first, so that std::bad_alloc leaves no memory behind.
      auto fresh = std::make_unique<Arena>();
      arenas_.reserve(arenas_.size() + 1);
      void* base = system_allocate(kArenaBytes);
      if (base == nullptr) return nullptr;
      Arena* full = current_;
      arenas_.push_back(std::move(fresh));
      current_ = arenas_.back().get();
      current_->base = static_cast<char*>(base);
      add_reserved(static_cast<int64_t>(kArenaBytes));
      stats_.arena_bytes += static_cast<int64_t>(kArenaBytes);
      if (full != nullptr && full->used < kArenaBytes) {
        try {
          free_.emplace(kArenaBytes - full->used, std::make_pair(full->base + full->used, full));
          poison_cached(full->base + full->used, kArenaBytes - full->used);
          full->used = kArenaBytes;
        } catch (const std::bad_alloc&) {
          // The rest of the full arena is never reused; it is freed with the arena.
        }
      }
    }
    void* p = current_->base + current_->used;
    current_->used += size;
    arena = current_;
    return p;
  }

  void add_reserved(int64_t bytes) {
    stats_.reserved_bytes += bytes;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }

  // Records a block handed out; only the first step can throw (std::bad_alloc).
  void note_allocated(void* p, const Block& block) {
    live_.emplace(p, block);
    if (block.arena != nullptr) ++block.arena->blocks_in_use;
    stats_.allocated_bytes += static_cast<int64_t>(block.size);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  }

  // Frees every cached block of its own, and every arena none of whose blocks is in use
  // (its cached blocks leave the free list with it). Arenas with a block in use stay, and
  // so do their cached blocks: they are part of the arena's memory.
  void release_cached_locked() {
    for (auto it = free_.begin(); it != free_.end();) {
      const auto [p, arena] = it->second;
      if (arena == nullptr) {
        unpoison(p, it->first);
        std::free(p);
        stats_.reserved_bytes -= static_cast<int64_t>(it->first);
      } else if (arena->blocks_in_use > 0) {
        ++it;
        continue;
      }
      it = free_.erase(it);
    }
    const auto unused = [](const std::unique_ptr<Arena>& a) { return a->blocks_in_use == 0; };
    for (const std::unique_ptr<Arena>& a : arenas_) {
      if (!unused(a)) continue;
      unpoison(a->base, kArenaBytes);
      std::free(a->base);
      stats_.reserved_bytes -= static_cast<int64_t>(kArenaBytes);
      stats_.arena_bytes -= static_cast<int64_t>(kArenaBytes);
      if (current_ == a.get()) current_ = nullptr;
    }
    arenas_.erase(std::remove_if(arenas_.begin(), arenas_.end(), unused), arenas_.end());
  }

  std::mutex mutex_;
  std::multimap<size_t, std::pair<void*, Arena*>> free_;
  std::unordered_map<void*, Block> live_;
  std::vector<std::unique_ptr<Arena>> arenas_;
  Arena* current_ = nullptr;  // the arena medium blocks are carved from now
  AllocatorStats stats_;
};

CachingAllocator& allocator() {
  // Never destroyed: tensors in static objects may be freed after main returns.
  static auto* a = new CachingAllocator();
  return *a;
}

}  // namespace

AllocatorStats allocator_stats() { return allocator().stats(); }
void reset_peak_memory_stats() { allocator().reset_peak(); }
void empty_cache() { allocator().empty_cache(); }
void* allocate_bytes(size_t nbytes, const char* op) { return allocator().allocate(nbytes, op); }
void free_bytes(void* ptr, size_t /*nbytes*/) { allocator().free(ptr); }

}  // namespace kiln
