// Which sanitizer this test build runs under, for tests whose bounds or expectations
// differ there. GCC says so with __SANITIZE_*__, clang only through __has_feature.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define KILN_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_TEST_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define KILN_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_TEST_TSAN 1
#endif
#endif
