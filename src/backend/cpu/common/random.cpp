#include "backend/cpu/common/random.h"

#include <array>
#include <cmath>

namespace kiln::cpu {
namespace {

using Block = std::array<uint32_t, 4>;

inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Philox-4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3"), the generator PyTorch and JAX use for counter-based streams.
Block philox(uint64_t counter, uint64_t seed) {
  Block c = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0};
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(0xD2511F53u, c[0], &hi0);
    uint32_t lo1 = mulhilo(0xCD9E8D57u, c[2], &hi1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

inline float to_unit_f32(uint32_t u) { return static_cast<float>(u >> 8) * 0x1.0p-24f; }
inline double to_unit_f64(uint32_t a, uint32_t b) {
  uint64_t u = (static_cast<uint64_t>(a) << 32 | b) >> 11;
  return static_cast<double>(u) * 0x1.0p-53;
}

// Runs fn(block_index, block) for every counter block covering n elements.
template <typename Fn>
void for_blocks(ThreadPool& pool, PhiloxKey key, uint64_t nblocks, Fn&& fn) {
  pool.parallel_for(static_cast<int64_t>(nblocks), 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i, philox(key.offset + static_cast<uint64_t>(i), key.seed));
  });
}

}  // namespace

void fill_uniform_f32(ThreadPool& pool, PhiloxKey key, float* out, int64_t n) {
  for_blocks(pool, key, uniform_blocks(n), [&](int64_t i, const Block& r) {
    for (int k = 0; k < 4 && 4 * i + k < n; ++k) out[4 * i + k] = to_unit_f32(r[k]);
  });
}

void fill_uniform_f64(ThreadPool& pool, PhiloxKey key, double* out, int64_t n) {
  for_blocks(pool, key, normal_blocks(n), [&](int64_t i, const Block& r) {
    for (int k = 0; k < 2 && 2 * i + k < n; ++k) out[2 * i + k] = to_unit_f64(r[2 * k], r[2 * k + 1]);
  });
}

void fill_normal_f32(ThreadPool& pool, PhiloxKey key, float* out, int64_t n) {
  for_blocks(pool, key, normal_blocks(n), [&](int64_t i, const Block& r) {
    // Box-Muller on two 53-bit uniforms; 1 - u keeps the log argument in (0, 1].
    double u1 = 1.0 - to_unit_f64(r[0], r[1]), u2 = to_unit_f64(r[2], r[3]);
    double radius = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * M_PI * u2;
    out[2 * i] = static_cast<float>(radius * std::cos(angle));
    if (2 * i + 1 < n) out[2 * i + 1] = static_cast<float>(radius * std::sin(angle));
  });
}

void fill_normal_f64(ThreadPool& pool, PhiloxKey key, double* out, int64_t n) {
  for_blocks(pool, key, normal_blocks(n), [&](int64_t i, const Block& r) {
    double u1 = 1.0 - to_unit_f64(r[0], r[1]), u2 = to_unit_f64(r[2], r[3]);
    double radius = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * M_PI * u2;
    out[2 * i] = radius * std::cos(angle);
    if (2 * i + 1 < n) out[2 * i + 1] = radius * std::sin(angle);
  });
}

void fill_randint(ThreadPool& pool, PhiloxKey key, int64_t low, uint64_t range, int64_t* out, int64_t n) {
  for_blocks(pool, key, randint_blocks(n), [&](int64_t i, const Block& r) {
    for (int k = 0; k < 2 && 2 * i + k < n; ++k) {
      uint64_t u = static_cast<uint64_t>(r[2 * k]) << 32 | r[2 * k + 1];
      // Modulo bias is below 2^-32 for any range under 2^32, the same as PyTorch's.
      out[2 * i + k] = static_cast<int64_t>(static_cast<uint64_t>(low) + u % range);
    }
  });
}

}  // namespace kiln::cpu
