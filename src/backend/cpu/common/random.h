// Philox-4x32-10 random streams on the CPU (the random table's kernels, and dropout's
// uniforms). Element i of a call depends only on (seed, counter offset, i), so results
// do not depend on the thread count.
#pragma once

#include <cstdint>

#include "backend/random.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

using backend::normal_blocks;
using backend::PhiloxKey;
using backend::randint_blocks;
using backend::uniform_blocks;

void fill_uniform_f32(ThreadPool& pool, PhiloxKey key, float* out, int64_t n);
void fill_uniform_f64(ThreadPool& pool, PhiloxKey key, double* out, int64_t n);
void fill_normal_f32(ThreadPool& pool, PhiloxKey key, float* out, int64_t n);
void fill_normal_f64(ThreadPool& pool, PhiloxKey key, double* out, int64_t n);
// Uniform on [low, low + range), range >= 1.
void fill_randint(ThreadPool& pool, PhiloxKey key, int64_t low, uint64_t range, int64_t* out, int64_t n);

}  // namespace kiln::cpu
