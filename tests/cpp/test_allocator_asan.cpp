// Under AddressSanitizer the caching allocator poisons the blocks it holds in its cache,
// so that a use after free through a cached block is reported as it would be with plain
// malloc (src/core/allocator.cpp). These tests only mean something in an ASan build
// (`make test-sanitize`, the asan preset); elsewhere they are skipped.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>

#include "kiln/allocator.h"
#include "kiln/tensor.h"
#include "sanitizer_build.h"

#ifdef KILN_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace kiln {
namespace {

#ifdef KILN_TEST_ASAN

// Sizes of each kind of block: small (the system allocator's), medium (carved from an
// arena) and large (a system allocation of its own).
constexpr size_t kSizes[] = {size_t{3000}, size_t{192} << 10, size_t{5} << 20};

// A read the compiler cannot drop.
char read_byte(const void* p, size_t offset) { return static_cast<const volatile char*>(p)[offset]; }

TEST(AllocatorAsan, CachedBlocksArePoisonedAndReusedBlocksAreNot) {
  empty_cache();  // so that the block freed below is the one the next request gets
  for (const size_t size : kSizes) {
    void* p = allocate_bytes(size);
    std::memset(p, 1, size);
    free_bytes(p, size);
    // In the cache now: poisoned from its first byte to its last.
    EXPECT_EQ(__asan_region_is_poisoned(p, 1), p) << size;
    EXPECT_NE(__asan_region_is_poisoned(static_cast<char*>(p) + size - 1, 1), nullptr) << size;
    // The same size comes back from the cache, whole and writable.
    void* q = allocate_bytes(size);
    EXPECT_EQ(q, p) << "expected a cache hit for " << size << " bytes";
    EXPECT_EQ(__asan_region_is_poisoned(q, size), nullptr) << size;
    std::memset(q, 2, size);
    free_bytes(q, size);
  }
}

TEST(AllocatorAsanDeathTest, ReadThroughAFreedTensorIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const size_t size : kSizes) {
    const void* stale = nullptr;
    {
      Tensor t = Tensor::empty({static_cast<int64_t>(size)}, DType::UInt8);
      std::memset(t.data_ptr(), 0, size);
      stale = t.data_ptr();
    }  // the tensor's block goes back to the cache here, not to the system
    EXPECT_DEATH((void)read_byte(stale, size / 2), "use-after-poison") << size;
  }
}

TEST(AllocatorAsanDeathTest, WriteThroughAFreedBlockIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  void* p = allocate_bytes(kSizes[1]);
  free_bytes(p, kSizes[1]);
  EXPECT_DEATH(static_cast<volatile char*>(p)[0] = 7, "use-after-poison");
}

#else

TEST(AllocatorAsan, NeedsAnAddressSanitizerBuild) {
  GTEST_SKIP() << "cache poisoning is checked in the asan build (make test-sanitize)";
}

#endif

}  // namespace
}  // namespace kiln
