// Integer arithmetic that every layer needs (block and panel counts, sizes, strides and
// byte counts), defined once.
//
// Sizes come from users and files, so a product of them may not fit in 64 bits; wrapped,
// it would allocate a few bytes for a huge tensor or pass a bounds check it should fail.
// Every product or sum of sizes, strides, offsets or byte counts goes through the checked
// forms below.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/error.h"

namespace kiln {

// a / b rounded up, for a >= 0 and b > 0; exact even for a near INT64_MAX.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// a * b and a + b, or false (and *out unspecified) when the exact result does not fit.
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }
inline bool checked_mul(size_t a, size_t b, size_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool checked_add(size_t a, size_t b, size_t* out) { return !__builtin_add_overflow(a, b, out); }

// The same, raising a RuntimeError-kind kiln::Error that names `op` and the operands when
// the result does not fit.
inline int64_t checked_mul(int64_t a, int64_t b, const char* op) {
  int64_t r;
  if (!checked_mul(a, b, &r)) [[unlikely]] {
    fail(ErrorKind::Runtime, op, "integer overflow: {} * {} does not fit in 64 bits", a, b);
  }
  return r;
}
inline int64_t checked_add(int64_t a, int64_t b, const char* op) {
  int64_t r;
  if (!checked_add(a, b, &r)) [[unlikely]] {
    fail(ErrorKind::Runtime, op, "integer overflow: {} + {} does not fit in 64 bits", a, b);
  }
  return r;
}

}  // namespace kiln
