// Tells AddressSanitizer which bytes of memory kiln manages itself are off limits. The
// caching allocator hands out blocks rounded up in size and keeps freed blocks for reuse,
// so without this a read past a tensor's end, or through a freed tensor, hits memory that
// is still allocated as far as ASan knows, and goes unnoticed. No-ops without ASan.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define KILN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ASAN 1
#endif
#endif

#ifdef KILN_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace kiln {

// Any access to [p, p + n) is reported as a use of poisoned memory.
inline void asan_poison(void* p, size_t n) {
#ifdef KILN_ASAN
  ASAN_POISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}

inline void asan_unpoison(void* p, size_t n) {
#ifdef KILN_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}

// A block of `block_size` bytes handed out for a request of `requested` bytes: the
// request is usable, the rounding slack after it is not.
inline void asan_hand_out(void* p, size_t requested, size_t block_size) {
  asan_unpoison(p, requested);
  asan_poison(static_cast<char*>(p) + requested, block_size - requested);
}

}  // namespace kiln
