// The caching allocator: 64-byte aligned blocks, freed blocks kept for reuse so that
// hot loops never fault in fresh pages, and statistics like torch.cuda.memory_stats.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

struct AllocatorStats {
  int64_t allocated_bytes = 0;       // bytes in blocks handed out to tensors now
  int64_t peak_allocated_bytes = 0;  // maximum of allocated_bytes since the last reset
  int64_t reserved_bytes = 0;        // bytes obtained from the system (in use + cached)
  int64_t peak_reserved_bytes = 0;
  int64_t arena_bytes = 0;           // of reserved_bytes: the huge-page arenas that blocks of
                                     // 64 KiB to 4 MiB are carved from (whole arenas)
  int64_t num_allocs = 0;            // allocations served since start
  int64_t num_cache_hits = 0;        // of which were served from the cache
};

AllocatorStats allocator_stats();
// Sets both peaks to the current values (torch.cuda.reset_peak_memory_stats).
void reset_peak_memory_stats();
// Returns every cached, unused block to the system (torch.cuda.empty_cache).
void empty_cache();

// The largest single allocation kiln asks the system for: 256 TiB, more than the user
// address space of x86-64 and arm64 systems (47-48 bits) can map. Larger requests fail
// at once, without asking the system (whose answer to an absurd size may be an abort
// under a sanitizer's allocator rather than a null pointer).
inline constexpr size_t kMaxAllocationBytes = size_t{1} << 48;

// Raw interface used by Storage; sizes are rounded up internally. A request the system
// refuses, or above kMaxAllocationBytes, raises a RuntimeError-kind kiln::Error naming
// `op`: "<op>: not enough memory: you tried to allocate N bytes" (PyTorch's wording).
void* allocate_bytes(size_t nbytes, const char* op = "allocate");
void free_bytes(void* ptr, size_t nbytes);

}  // namespace kiln
