// The row scaling of the chunked gated delta rule (scale_row) on every SIMD target,
// against the scalar product it replaces: bit for bit (one rounding per element, as the
// scalar loop), at lengths around the vector width, in place and out of place, with
// the neighbours past the row left untouched.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/gated_delta/chunk_rows.h"
#include "simd_targets.h"

namespace kiln::cpu {
namespace {

constexpr float kGuard = 12345.0f;

TEST(ChunkRows, ScaleRowMatchesScalarOnEveryTarget) {
  simd_targets::for_each(chunk_rows_simd_targets(), [] {
    std::mt19937 rng(31);
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    for (int64_t n : {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 127, 128, 129, 256}) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " in_place " << in_place);
        const float s = dist(rng);
        std::vector<float> x(static_cast<size_t>(n) + 2, kGuard);
        for (int64_t i = 1; i <= n; ++i) x[static_cast<size_t>(i)] = dist(rng);
        std::vector<float> out = in_place ? x : std::vector<float>(x.size(), kGuard);
        scale_row(x.data() + 1, s, n, out.data() + 1);
        ASSERT_EQ(out.front(), kGuard);
        ASSERT_EQ(out.back(), kGuard);
        for (int64_t i = 1; i <= n; ++i) ASSERT_EQ(out[static_cast<size_t>(i)], s * x[static_cast<size_t>(i)]) << i;
      }
    }
  });
}

// Odd sizes do not fault or misalign: a row starting at every offset within a vector.
TEST(ChunkRows, ScaleRowAnyAlignment) {
  std::vector<float> x(80);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 40.0f;
  for (int64_t offset = 0; offset < 16; ++offset) {
    std::vector<float> out(x.size(), kGuard);
    scale_row(x.data() + offset, 0.5f, 63, out.data() + offset);
    for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
      const bool inside = i >= offset && i < offset + 63;
      ASSERT_EQ(out[static_cast<size_t>(i)], inside ? 0.5f * x[static_cast<size_t>(i)] : kGuard) << offset << " " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
