// Philox-4x32-10 random streams. Element i of a call depends only on (seed, counter
// offset, i), so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "kiln/thread_pool.h"

namespace kiln::cpu {

struct PhiloxKey {
  uint64_t seed;
  uint64_t offset;  // first 128-bit counter of this call
};

// Counters each fill call consumes for n elements (the generator advances by this).
inline uint64_t uniform_blocks(int64_t n) { return static_cast<uint64_t>((n + 3) / 4); }
inline uint64_t normal_blocks(int64_t n) { return static_cast<uint64_t>((n + 1) / 2); }
inline uint64_t randint_blocks(int64_t n) { return static_cast<uint64_t>((n + 1) / 2); }

void fill_uniform_f32(ThreadPool& pool, PhiloxKey key, float* out, int64_t n);
void fill_uniform_f64(ThreadPool& pool, PhiloxKey key, double* out, int64_t n);
void fill_normal_f32(ThreadPool& pool, PhiloxKey key, float* out, int64_t n);
void fill_normal_f64(ThreadPool& pool, PhiloxKey key, double* out, int64_t n);
// Uniform on [low, low + range), range >= 1.
void fill_randint(ThreadPool& pool, PhiloxKey key, int64_t low, uint64_t range, int64_t* out, int64_t n);

}  // namespace kiln::cpu
