// FP8 weights and scales for the prefill benchmarks (bench_prefill.cpp,
// bench_prefill_gemm.cpp): deterministic, no generator state shared between suites.
#pragma once

#include <cstdint>

#include "kiln/ops/creation.h"
#include "kiln/tensor.h"

namespace kiln::bench {

// Every e4m3fn code but the NaN codes, subnormals included, from a linear congruential
// stream seeded by `seed`.
inline Tensor pseudo_random_fp8(const Shape& shape, uint64_t seed) {
  Tensor t = empty(shape, DType::Float8_e4m3fn);
  uint8_t* p = t.data<uint8_t>();
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 3;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint8_t b = static_cast<uint8_t>(static_cast<uint32_t>(state >> 33) >> 8);
    if ((b & 0x7F) == 0x7F) b ^= 0x01;
    p[i] = b;
  }
  return t;
}

// Scales of `value` for `rows` x `cols` FP8 weights (after `lead` dims of experts): one
// per row, or one per 128x128 block when `blocked`.
inline Tensor fp8_scales(Shape lead, int64_t rows, int64_t cols, bool blocked, double value) {
  Shape shape = lead;
  if (blocked) {
    shape.push_back((rows + 127) / 128);
    shape.push_back((cols + 127) / 128);
  } else {
    shape.push_back(rows);
  }
  return full(shape, Scalar(value), DType::Float32);
}

}  // namespace kiln::bench
