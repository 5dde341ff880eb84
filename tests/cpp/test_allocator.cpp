// The caching allocator's medium-block arenas (64 KiB to 4 MiB): blocks carved from
// 2 MiB-aligned 32 MiB arenas, reuse through the free list, statistics, empty_cache()
// returning an arena only once none of its blocks is in use, and concurrent use.
//
// The allocator is process-wide, so every check is relative to the state the test finds
// (other tests may leave cached blocks behind); sizes are chosen so that no other test's
// cached blocks fit them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "kiln/allocator.h"

namespace kiln {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kArenaBytes = 32 * kMiB;

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Allocates `size`-byte blocks until one of them opens a new arena; returns them all,
// the one that opened it last.
std::vector<void*> allocate_until_new_arena(size_t size) {
  std::vector<void*> blocks;
  const int64_t arenas_before = allocator_stats().arena_bytes;
  while (allocator_stats().arena_bytes == arenas_before) {
    blocks.push_back(allocate_bytes(size));
    if (blocks.size() > 2 * kArenaBytes / size) break;  // no arena ever opened: fail below
  }
  return blocks;
}

void free_all(const std::vector<void*>& blocks, size_t size) {
  for (void* p : blocks) free_bytes(p, size);
}

TEST(AllocatorArena, MediumBlocksAreCarvedFromHugePageAlignedArenas) {
  empty_cache();
  const AllocatorStats s0 = allocator_stats();
  const size_t size = 1536 * kKiB;  // an FP8 expert matrix of 768 x 2048
  std::vector<void*> blocks = allocate_until_new_arena(size);
  const AllocatorStats s1 = allocator_stats();
  ASSERT_EQ(s1.arena_bytes, s0.arena_bytes + static_cast<int64_t>(kArenaBytes));
  EXPECT_EQ(s1.reserved_bytes - s0.reserved_bytes, s1.arena_bytes - s0.arena_bytes);
  // The block that opened the arena sits at its start, on a 2 MiB boundary; the next
  // ones follow it back to back.
  void* first = blocks.back();
  EXPECT_EQ(address(first) % (2 * kMiB), 0u);
  std::vector<void*> more;
  for (int i = 0; i < 3; ++i) more.push_back(allocate_bytes(size));
  EXPECT_EQ(address(more[0]), address(first) + size);
  EXPECT_EQ(address(more[2]), address(first) + 3 * size);
  EXPECT_EQ(allocator_stats().arena_bytes, s1.arena_bytes);  // no new arena for them
  for (void* p : more) EXPECT_EQ(address(p) % 64, 0u);
  // Every block is usable in full and they do not overlap.
  for (size_t i = 0; i < more.size(); ++i) std::memset(more[i], static_cast<int>(i + 1), size);
  for (size_t i = 0; i < more.size(); ++i) {
    const auto* bytes = static_cast<const unsigned char*>(more[i]);
    EXPECT_EQ(bytes[0], i + 1);
    EXPECT_EQ(bytes[size - 1], i + 1);
  }
  free_all(more, size);
  free_all(blocks, size);
  empty_cache();
  const AllocatorStats s2 = allocator_stats();
  EXPECT_EQ(s2.arena_bytes, s0.arena_bytes);
  EXPECT_EQ(s2.reserved_bytes, s0.reserved_bytes);
  EXPECT_EQ(s2.allocated_bytes, s0.allocated_bytes);
}

TEST(AllocatorArena, FreedMediumBlocksAreReusedAndCounted) {
  empty_cache();
  const AllocatorStats s0 = allocator_stats();
  const size_t size = 2240 * kKiB;  // rounds to itself (a multiple of 64 KiB)
  void* p = allocate_bytes(size - 100);
  const AllocatorStats s1 = allocator_stats();
  EXPECT_EQ(s1.allocated_bytes - s0.allocated_bytes, static_cast<int64_t>(size));
  EXPECT_GE(s1.peak_allocated_bytes, s1.allocated_bytes);
  EXPECT_GE(s1.peak_reserved_bytes, s1.reserved_bytes);
  free_bytes(p, size - 100);
  EXPECT_EQ(allocator_stats().allocated_bytes, s0.allocated_bytes);
  EXPECT_EQ(allocator_stats().reserved_bytes, s1.reserved_bytes);  // kept cached
  void* again = allocate_bytes(size);
  EXPECT_EQ(again, p);
  EXPECT_EQ(allocator_stats().num_cache_hits, s1.num_cache_hits + 1);
  // A smaller request within the slack rule (at most 1/8 over 1 MiB) takes the block too.
  free_bytes(again, size);
  void* smaller = allocate_bytes(2048 * kKiB);
  EXPECT_EQ(smaller, p);
  free_bytes(smaller, 2048 * kKiB);
  empty_cache();
  EXPECT_EQ(allocator_stats().allocated_bytes, s0.allocated_bytes);
}

TEST(AllocatorArena, EmptyCacheReleasesAnArenaOnlyWhenAllItsBlocksAreFree) {
  empty_cache();
  const AllocatorStats s0 = allocator_stats();
  const size_t size = 704 * kKiB;
  std::vector<void*> blocks = allocate_until_new_arena(size);
  ASSERT_EQ(allocator_stats().arena_bytes, s0.arena_bytes + static_cast<int64_t>(kArenaBytes));
  void* opener = blocks.back();
  blocks.pop_back();
  void* neighbour = allocate_bytes(size);  // the same new arena
  EXPECT_EQ(address(neighbour), address(opener) + size);
  free_all(blocks, size);
  free_bytes(opener, size);
  empty_cache();
  // `neighbour` is still in use: its arena stays, and so does the freed `opener` in it.
  EXPECT_EQ(allocator_stats().arena_bytes, s0.arena_bytes + static_cast<int64_t>(kArenaBytes));
  EXPECT_EQ(allocate_bytes(size), opener);
  free_bytes(opener, size);
  free_bytes(neighbour, size);
  empty_cache();
  EXPECT_EQ(allocator_stats().arena_bytes, s0.arena_bytes);
  EXPECT_EQ(allocator_stats().reserved_bytes, s0.reserved_bytes);
}

TEST(AllocatorArena, TheRestOfAFullArenaServesSmallerRequests) {
  empty_cache();
  const size_t size = 3 * kMiB;  // 10 fit in an arena, leaving 2 MiB
  std::vector<void*> blocks = allocate_until_new_arena(size);
  void* opener = blocks.back();
  for (int i = 0; i < 9; ++i) blocks.push_back(allocate_bytes(size));
  const int64_t arenas = allocator_stats().arena_bytes;
  blocks.push_back(allocate_bytes(size));  // the eleventh opens another arena
  EXPECT_EQ(allocator_stats().arena_bytes, arenas + static_cast<int64_t>(kArenaBytes));
  // The 2 MiB left at the end of the full arena is a cached block now.
  void* rest = allocate_bytes(2 * kMiB);
  EXPECT_EQ(address(rest), address(opener) + 10 * size);
  free_bytes(rest, 2 * kMiB);
  free_all(blocks, size);
  empty_cache();
  EXPECT_EQ(allocator_stats().arena_bytes, arenas - static_cast<int64_t>(kArenaBytes));
}

TEST(AllocatorArena, SmallAndLargeBlocksStayOutOfArenas) {
  empty_cache();
  const AllocatorStats s0 = allocator_stats();
  void* small = allocate_bytes(48 * kKiB);
  void* large = allocate_bytes(6 * kMiB);
  const AllocatorStats s1 = allocator_stats();
  EXPECT_EQ(s1.arena_bytes, s0.arena_bytes);
  EXPECT_EQ(s1.reserved_bytes - s0.reserved_bytes, static_cast<int64_t>(48 * kKiB + 6 * kMiB));
  EXPECT_EQ(address(large) % (2 * kMiB), 0u);
  free_bytes(small, 48 * kKiB);
  free_bytes(large, 6 * kMiB);
  empty_cache();
  EXPECT_EQ(allocator_stats().reserved_bytes, s0.reserved_bytes);
}

TEST(AllocatorArena, ConcurrentThreadsGetDisjointBlocks) {
  empty_cache();
  const AllocatorStats s0 = allocator_stats();
  constexpr int kThreads = 4;
  constexpr int kRounds = 50;
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &corrupted] {
      std::vector<std::pair<void*, size_t>> held;
      for (int r = 0; r < kRounds; ++r) {
        const size_t size = (64 + 64 * static_cast<size_t>((t + r) % 7)) * kKiB;
        void* p = allocate_bytes(size);
        std::memset(p, t + 1, size);
        held.emplace_back(p, size);
        if (r % 3 == 2) {  // free the oldest, so blocks move between threads
          auto [q, n] = held.front();
          const auto* bytes = static_cast<const unsigned char*>(q);
          if (bytes[0] != t + 1 || bytes[n / 2] != t + 1 || bytes[n - 1] != t + 1) ++corrupted;
          free_bytes(q, n);
          held.erase(held.begin());
        }
      }
      for (auto [q, n] : held) {
        const auto* bytes = static_cast<const unsigned char*>(q);
        if (bytes[0] != t + 1 || bytes[n - 1] != t + 1) ++corrupted;
        free_bytes(q, n);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(allocator_stats().allocated_bytes, s0.allocated_bytes);
  empty_cache();
  EXPECT_EQ(allocator_stats().arena_bytes, s0.arena_bytes);
  EXPECT_EQ(allocator_stats().reserved_bytes, s0.reserved_bytes);
}

}  // namespace
}  // namespace kiln
