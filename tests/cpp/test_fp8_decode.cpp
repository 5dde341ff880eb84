// The shared float8_e4m3fn decoder (backend/cpu/common/fp8_decode-inl.h) against the
// scalar decoder of kiln/scalar_types.h: every one of the 256 codes at every position of
// a SIMD step, both policies, bf16 patterns and float32, every length of a partial step,
// on each Highway target the CPU supports. Then its users: the FP8 weight panels of the
// many-row linear give sgemm exactly the floats that bf16 weights of the same values
// give (so the products agree bit for bit).
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/common/fp8_decode.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/linear.h"
#include "kiln/scalar_types.h"
#include "linear_test_util.h"
#include "simd_targets.h"

namespace {

using namespace kiln;
using cpu::Fp8Decode;

// The expected bf16 pattern of `code`, from the scalar decoder: Exact is the value (NaN
// codes a quiet NaN with their sign); Kernel is the value times 2^-8 with the NaN codes
// read as ±480 (the kernels' documented reading). Every value is a bf16 value, which the
// round trip checks.
uint16_t expected_bf16(uint8_t code, Fp8Decode mode) {
  const uint16_t sign = static_cast<uint16_t>((code & 0x80) << 8);
  const bool nan = (code & 0x7F) == 0x7F;
  if (mode == Fp8Decode::Exact) {
    if (nan) return static_cast<uint16_t>(sign | 0x7FC0);
    const float v = fp8_e4m3fn_bits_to_float(code);
    const uint16_t bits = float_to_bf16_bits(v);
    EXPECT_EQ(bf16_bits_to_float(bits), v) << "code " << int{code} << " is not a bf16 value";
    return bits;
  }
  const float real = nan ? ((code & 0x80) ? -480.0f : 480.0f) : fp8_e4m3fn_bits_to_float(code);
  const float v = std::ldexp(real, -8);
  const uint16_t bits = float_to_bf16_bits(v);
  EXPECT_EQ(bf16_bits_to_float(bits), v) << "code " << int{code};
  return bits;
}

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%X", v);
  return buf;
}

// Decodes src[0, n) both ways and compares every element's bits.
void check_codes(const uint8_t* src, size_t n, Fp8Decode mode, const std::string& what) {
  std::vector<uint16_t> bf16(n + 1, 0xDEAD);
  std::vector<float> f32(n + 1, -1.0f);
  cpu::fp8_e4m3fn_to_bf16(src, bf16.data(), static_cast<int64_t>(n), mode);
  cpu::fp8_e4m3fn_to_f32(src, f32.data(), static_cast<int64_t>(n), mode);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t want = expected_bf16(src[i], mode);
    ASSERT_EQ(bf16[i], want) << what << ": bf16 of code " << hex(src[i]) << " at " << i;
    ASSERT_EQ(std::bit_cast<uint32_t>(f32[i]), uint32_t{want} << 16)
        << what << ": f32 of code " << hex(src[i]) << " at " << i;
  }
  // Nothing past n is written.
  EXPECT_EQ(bf16[n], 0xDEAD) << what;
  EXPECT_EQ(f32[n], -1.0f) << what;
}

constexpr Fp8Decode kModes[] = {Fp8Decode::Exact, Fp8Decode::Kernel};

// Code (r + q) mod 256 at index 256 q + r: every code meets every position modulo 256,
// so every lane of every step (64 codes at most) sees all 256 codes.
TEST(Fp8Decode, EveryCodeAtEveryStepPositionOnEachTarget) {
  std::vector<uint8_t> src(size_t{1} << 16);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>((i % 256 + i / 256) % 256);
  simd_targets::for_each(cpu::fp8_decode_simd_targets(), [&] {
    for (Fp8Decode mode : kModes) {
      check_codes(src.data(), src.size(), mode, mode == Fp8Decode::Exact ? "exact" : "kernel");
    }
  });
}

// Lengths around every target's step (8, 16, 32 and 64 codes), from unaligned addresses:
// the partial step goes through a zero-padded buffer and must not write past n.
TEST(Fp8Decode, PartialStepsAndUnalignedOnEachTarget) {
  std::vector<uint8_t> pool(300);
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<uint8_t>(i * 97 + 13);
  simd_targets::for_each(cpu::fp8_decode_simd_targets(), [&] {
    for (Fp8Decode mode : kModes) {
      for (size_t offset : {size_t{0}, size_t{1}, size_t{3}}) {
        for (size_t n : {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200}) {
          check_codes(pool.data() + offset, n, mode, "n " + std::to_string(n) + " offset " + std::to_string(offset));
        }
      }
    }
  });
}

TEST(Fp8Decode, EmptyWritesNothing) {
  uint16_t bf16 = 7;
  float f32 = 7.0f;
  cpu::fp8_e4m3fn_to_bf16(nullptr, &bf16, 0, Fp8Decode::Exact);
  cpu::fp8_e4m3fn_to_f32(nullptr, &f32, 0, Fp8Decode::Kernel);
  EXPECT_EQ(bf16, 7);
  EXPECT_EQ(f32, 7.0f);
}

// The FP8 panel widening (linear_gemm) decodes into natural order with plain stores:
// with scales that are powers of two, its f32 panel holds exactly the floats a bf16
// weight of the same values widens to, sgemm runs on identical operands, and the results
// must be identical, bit for bit. Shapes with K past and short of whole decoder steps,
// several 128 blocks, rows split into panels over threads, on every target.
TEST(Fp8Decode, ManyRowFp8PanelsMatchBf16WeightsBitForBitOnEachTarget) {
  linear_test::for_each_target([] {
    uint64_t seed = 40;
    const std::array<int64_t, 3> shapes[] = {{2, 5, 1}, {3, 17, 63}, {5, 33, 65}, {7, 130, 300}, {9, 64, 1000}};
    for (const auto& [M, N, K] : shapes) {
      for (bool blocked : {false, true}) {
        SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) +
                     (blocked ? " block scales" : " row scales"));
        const Tensor x = linear_test::random_tensor({M, K}, DType::BFloat16, ++seed);
        const Tensor q = linear_test::random_fp8({N, K}, ++seed);
        const int64_t nb = (N + 127) / 128, kb = (K + 127) / 128;
        Tensor scale = empty(blocked ? Shape{nb, kb} : Shape{N}, DType::Float32);
        for (int64_t i = 0; i < scale.numel(); ++i) scale.data<float>()[i] = std::ldexp(1.0f, static_cast<int>(i % 5) - 2);
        // The same weights as bf16: e4m3 value times its power-of-two scale, exact.
        Tensor w = empty({N, K}, DType::BFloat16);
        for (int64_t n = 0; n < N; ++n) {
          for (int64_t k = 0; k < K; ++k) {
            const float s = blocked ? scale.data<float>()[n / 128 * kb + k / 128] : scale.data<float>()[n];
            const float v = fp8_e4m3fn_bits_to_float(q.data<uint8_t>()[n * K + k]) * s;
            w.data<uint16_t>()[n * K + k] = float_to_bf16_bits(v);
            ASSERT_EQ(bf16_bits_to_float(w.data<uint16_t>()[n * K + k]), v);
          }
        }
        const std::vector<double> fp8_y = linear_test::values(linear_fp8(x, q, scale));
        const std::vector<double> bf16_y = linear_test::values(linear(x, w));
        ASSERT_EQ(fp8_y.size(), bf16_y.size());
        for (size_t i = 0; i < fp8_y.size(); ++i) ASSERT_EQ(fp8_y[i], bf16_y[i]) << "element " << i;
      }
    }
  });
}

}  // namespace
