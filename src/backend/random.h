// The random family of the kernel table: Philox-4x32-10 streams that fill a tensor with
// uniform, normal or integer values (front end: src/ops/creation.cpp). Element i of a
// fill depends only on (seed, counter offset, i), never on the device or thread count.
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/tensor.h"

namespace kiln::backend {

struct PhiloxKey {
  uint64_t seed;
  uint64_t offset;  // first 128-bit counter of this call
};

// Counters a fill of n elements consumes (the front end advances the generator by
// this): four float32 uniforms per counter; two float64 uniforms, two normals or two
// integers per counter.
inline uint64_t uniform_blocks(int64_t n) { return static_cast<uint64_t>((n + 3) / 4); }
inline uint64_t normal_blocks(int64_t n) { return static_cast<uint64_t>((n + 1) / 2); }
inline uint64_t randint_blocks(int64_t n) { return static_cast<uint64_t>((n + 1) / 2); }

// `out` is contiguous, float32 or float64 (uniform on [0, 1), or standard normal).
struct RandomFill {
  PhiloxKey key;
  const Tensor& out;
};

// `out` is contiguous int64, uniform on [low, low + range), range >= 1.
struct RandintFill {
  PhiloxKey key;
  int64_t low;
  uint64_t range;
  const Tensor& out;
};

struct RandomKernels {
  void (*uniform)(const ExecutionContext& ctx, const RandomFill& f) = nullptr;
  void (*normal)(const ExecutionContext& ctx, const RandomFill& f) = nullptr;
  void (*randint)(const ExecutionContext& ctx, const RandintFill& f) = nullptr;
};

inline KernelTable<RandomKernels> random_kernels{"random"};

}  // namespace kiln::backend
