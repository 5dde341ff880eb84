// kiln::Half / BFloat16 / Float8_e4m3fn / Float8_e5m2 against an independent decode
// formula (sign, exponent, mantissa evaluated in double) and exhaustive rounding checks.
#include <gtest/gtest.h>
#include <kiln/scalar_types.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace {

using kiln::BFloat16;
using kiln::Float8_e4m3fn;
using kiln::Float8_e5m2;
using kiln::Half;

// A format as the test sees it: field widths and whether the all-ones exponent is
// IEEE inf/NaN (otherwise only the all-ones code is NaN, as in e4m3fn).
struct Format {
  int exp_bits;
  int man_bits;
  bool ieee_specials;
  float (*decode)(uint32_t);
  uint32_t (*encode)(float);

  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }
  uint32_t num_codes() const { return sign_bit() << 1; }
  bool is_nan_code(uint32_t c) const {
    const uint32_t mag = c & (sign_bit() - 1);
    const uint32_t exp_ones = ((1u << exp_bits) - 1) << man_bits;
    return ieee_specials ? mag > exp_ones : mag == sign_bit() - 1;
  }
  // Largest non-negative finite code (codes below it are ordered by value).
  uint32_t max_finite_code() const { return ieee_specials ? (((1u << exp_bits) - 1) << man_bits) - 1 : sign_bit() - 2; }

  // The value of a code, from the textbook definition.
  double reference(uint32_t c) const {
    const bool neg = (c & sign_bit()) != 0;
    const uint32_t e = (c >> man_bits) & ((1u << exp_bits) - 1);
    const uint32_t m = c & ((1u << man_bits) - 1);
    double v;
    if (is_nan_code(c)) {
      v = std::numeric_limits<double>::quiet_NaN();
    } else if (ieee_specials && e == (1u << exp_bits) - 1) {
      v = std::numeric_limits<double>::infinity();
    } else if (e == 0) {
      v = std::ldexp(static_cast<double>(m), 1 - bias() - man_bits);
    } else {
      v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -man_bits), static_cast<int>(e) - bias());
    }
    return neg ? -v : v;
  }
};

const Format kHalf{5, 10, true, [](uint32_t c) { return kiln::half_bits_to_float(static_cast<uint16_t>(c)); },
                   [](float x) -> uint32_t { return kiln::float_to_half_bits(x); }};
const Format kBf16{8, 7, true, [](uint32_t c) { return kiln::bf16_bits_to_float(static_cast<uint16_t>(c)); },
                   [](float x) -> uint32_t { return kiln::float_to_bf16_bits(x); }};
const Format kE4m3{4, 3, false, [](uint32_t c) { return kiln::fp8_e4m3fn_bits_to_float(static_cast<uint8_t>(c)); },
                   [](float x) -> uint32_t { return kiln::float_to_fp8_e4m3fn_bits(x); }};
const Format kE5m2{5, 2, true, [](uint32_t c) { return kiln::fp8_e5m2_bits_to_float(static_cast<uint8_t>(c)); },
                   [](float x) -> uint32_t { return kiln::float_to_fp8_e5m2_bits(x); }};

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }

// Every code decodes to its textbook value (NaN codes to a NaN of the same sign) and,
// unless NaN, encodes back to itself. NaN codes encode to `nan_code(c)`.
template <typename NanCode>
void check_all_codes(const Format& f, NanCode nan_code) {
  for (uint32_t c = 0; c < f.num_codes(); ++c) {
    const float got = f.decode(c);
    const double want = f.reference(c);
    const bool neg = (c & f.sign_bit()) != 0;
    if (f.is_nan_code(c)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      EXPECT_EQ(std::signbit(got), neg) << "code " << c;
      EXPECT_EQ(f.encode(got), nan_code(c)) << "code " << c;
      continue;
    }
    // Every finite code is exactly a float, so the comparison is exact; the signbit
    // check catches -0.
    EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
    EXPECT_EQ(std::signbit(got), neg) << "code " << c;
    EXPECT_EQ(f.encode(got), c) << "code " << c;
  }
}

// Round to nearest even between every pair of adjacent non-negative finite codes, and
// the same mirrored for negatives: the midpoint goes to the even code, the floats just
// either side of it go to the nearer code.
void check_ties(const Format& f) {
  for (uint32_t c = 0; c < f.max_finite_code(); ++c) {
    const double lo = f.reference(c), hi = f.reference(c + 1);
    const double mid = (lo + hi) / 2;
    const float midf = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(midf), mid) << "midpoint not a float, code " << c;
    const uint32_t even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(f.encode(midf), even) << "tie above code " << c;
    EXPECT_EQ(f.encode(std::nextafter(midf, 0.0f)), c) << "below tie above code " << c;
    EXPECT_EQ(f.encode(std::nextafter(midf, INFINITY)), c + 1) << "above tie above code " << c;
    EXPECT_EQ(f.encode(-midf), even | f.sign_bit()) << "negative tie above code " << c;
  }
}

TEST(ScalarTypes, LayoutIsJustTheBits) {
  static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);
  static_assert(sizeof(Float8_e4m3fn) == 1 && sizeof(Float8_e5m2) == 1);
  static_assert(std::is_trivially_copyable_v<Half> && std::is_trivially_copyable_v<BFloat16>);
  static_assert(std::is_trivially_copyable_v<Float8_e4m3fn> && std::is_trivially_copyable_v<Float8_e5m2>);
  static_assert(Half::from_bits(0x3C00).bits == 0x3C00);
  static_assert(static_cast<float>(Float8_e4m3fn::from_bits(0x7E)) == 448.0f);
  EXPECT_EQ(Half().bits, 0);
  EXPECT_EQ(BFloat16().bits, 0);
  EXPECT_EQ(Float8_e4m3fn().bits, 0);
  EXPECT_EQ(Float8_e5m2().bits, 0);
}

TEST(ScalarFp8, E4m3fnAllCodes) {
  check_all_codes(kE4m3, [&](uint32_t c) { return (c & 0x80) | 0x7F; });
}

TEST(ScalarFp8, E5m2AllCodes) {
  check_all_codes(kE5m2, [&](uint32_t c) { return (c & 0x80) | 0x7F; });
}

TEST(ScalarFp8, E4m3fnTies) { check_ties(kE4m3); }
TEST(ScalarFp8, E5m2Ties) { check_ties(kE5m2); }

TEST(ScalarFp8, E4m3fnSaturatesAndKeepsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Float8_e4m3fn(448.0f).bits, 0x7E);
  EXPECT_EQ(Float8_e4m3fn(std::nextafter(448.0f, 0.0f)).bits, 0x7E);
  // 464 is the tie between 448 and the missing 480: even mantissa, 448.
  EXPECT_EQ(Float8_e4m3fn(464.0f).bits, 0x7E);
  // Past the tie the classic code produced NaN; kiln saturates (PyTorch >= 2.12).
  EXPECT_EQ(Float8_e4m3fn(std::nextafter(464.0f, inf)).bits, 0x7E);
  EXPECT_EQ(Float8_e4m3fn(480.0f).bits, 0x7E);
  EXPECT_EQ(Float8_e4m3fn(1e30f).bits, 0x7E);
  EXPECT_EQ(Float8_e4m3fn(std::numeric_limits<float>::max()).bits, 0x7E);
  EXPECT_EQ(Float8_e4m3fn(inf).bits, 0x7E);
  EXPECT_EQ(Float8_e4m3fn(-inf).bits, 0xFE);
  EXPECT_EQ(Float8_e4m3fn(-480.0f).bits, 0xFE);
  EXPECT_EQ(Float8_e4m3fn(nan).bits, 0x7F);
  EXPECT_EQ(Float8_e4m3fn(-nan).bits, 0xFF);
  EXPECT_EQ(Float8_e4m3fn(std::bit_cast<float>(0x7F800001u)).bits, 0x7F);  // signalling
  EXPECT_EQ(static_cast<float>(Float8_e4m3fn::from_bits(0xFE)), -448.0f);
}

TEST(ScalarFp8, E4m3fnSubnormalsAndZero) {
  EXPECT_EQ(static_cast<float>(Float8_e4m3fn::from_bits(0x01)), 0x1p-9f);
  EXPECT_EQ(static_cast<float>(Float8_e4m3fn::from_bits(0x07)), 7 * 0x1p-9f);
  EXPECT_EQ(static_cast<float>(Float8_e4m3fn::from_bits(0x08)), 0x1p-6f);
  // Half the smallest subnormal ties to zero; anything above rounds up to it.
  EXPECT_EQ(Float8_e4m3fn(0x1p-10f).bits, 0x00);
  EXPECT_EQ(Float8_e4m3fn(std::nextafter(0x1p-10f, 1.0f)).bits, 0x01);
  EXPECT_EQ(Float8_e4m3fn(-0x1p-10f).bits, 0x80);
  // Just below the smallest normal rounds up into it.
  EXPECT_EQ(Float8_e4m3fn(std::nextafter(0x1p-6f, 0.0f)).bits, 0x08);
  EXPECT_EQ(Float8_e4m3fn(std::numeric_limits<float>::denorm_min()).bits, 0x00);
  EXPECT_EQ(Float8_e4m3fn(-std::numeric_limits<float>::denorm_min()).bits, 0x80);
  EXPECT_EQ(Float8_e4m3fn(-0.0f).bits, 0x80);
  EXPECT_TRUE(std::signbit(static_cast<float>(Float8_e4m3fn::from_bits(0x80))));
}

TEST(ScalarFp8, E5m2OverflowIsInf) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Float8_e5m2(57344.0f).bits, 0x7B);
  EXPECT_EQ(static_cast<float>(Float8_e5m2::from_bits(0x7B)), 57344.0f);
  // 61440 is the tie between 57344 (odd mantissa) and 65536, which is inf.
  EXPECT_EQ(Float8_e5m2(std::nextafter(61440.0f, 0.0f)).bits, 0x7B);
  EXPECT_EQ(Float8_e5m2(61440.0f).bits, 0x7C);
  EXPECT_EQ(Float8_e5m2(-61440.0f).bits, 0xFC);
  EXPECT_EQ(Float8_e5m2(1e30f).bits, 0x7C);
  EXPECT_EQ(Float8_e5m2(inf).bits, 0x7C);
  EXPECT_EQ(Float8_e5m2(-inf).bits, 0xFC);
  EXPECT_EQ(static_cast<float>(Float8_e5m2::from_bits(0x7C)), inf);
  EXPECT_EQ(Float8_e5m2(std::numeric_limits<float>::quiet_NaN()).bits, 0x7F);
  EXPECT_EQ(Float8_e5m2(-std::numeric_limits<float>::quiet_NaN()).bits, 0xFF);
  EXPECT_EQ(Float8_e5m2(0x1p-16f).bits, 0x01);
  EXPECT_EQ(Float8_e5m2(0x1p-17f).bits, 0x00);
  EXPECT_EQ(Float8_e5m2(3 * 0x1p-17f).bits, 0x02);
  EXPECT_EQ(Float8_e5m2(-0.0f).bits, 0x80);
}

TEST(ScalarFp8, E5m2IsTheTopByteOfAHalf) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float a = static_cast<float>(Float8_e5m2::from_bits(static_cast<uint8_t>(c)));
    const float b = static_cast<float>(Half::from_bits(static_cast<uint16_t>(c << 8)));
    EXPECT_EQ(bits_of(a), bits_of(b)) << "code " << c;
  }
}

TEST(ScalarHalf, AllCodes) {
  // NaNs come back quiet with the payload they had.
  check_all_codes(kHalf, [](uint32_t c) { return c | 0x200; });
}

TEST(ScalarHalf, Ties) { check_ties(kHalf); }

TEST(ScalarHalf, OverflowAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Half(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(Half(std::nextafter(65520.0f, 0.0f)).bits, 0x7BFF);
  EXPECT_EQ(Half(65520.0f).bits, 0x7C00);
  EXPECT_EQ(Half(-65520.0f).bits, 0xFC00);
  EXPECT_EQ(Half(1e30f).bits, 0x7C00);
  EXPECT_EQ(Half(inf).bits, 0x7C00);
  EXPECT_EQ(Half(-inf).bits, 0xFC00);
  EXPECT_EQ(Half(std::numeric_limits<float>::quiet_NaN()).bits, 0x7E00);
  EXPECT_EQ(Half(-std::numeric_limits<float>::quiet_NaN()).bits, 0xFE00);
  // A signalling NaN is quieted, keeping the top payload bits (as F16C does).
  EXPECT_EQ(Half(std::bit_cast<float>(0x7F802000u)).bits, 0x7E01);
  // Payload bits below the half's 10 must not turn a NaN into inf.
  EXPECT_EQ(Half(std::bit_cast<float>(0x7F800001u)).bits, 0x7E00);
  EXPECT_EQ(Half(0x1p-24f).bits, 0x0001);
  EXPECT_EQ(Half(0x1p-25f).bits, 0x0000);
  EXPECT_EQ(Half(-0.0f).bits, 0x8000);
}

TEST(ScalarHalf, DoubleGoesThroughFloat) {
  // Rounded directly, this double is above the tie between 1 and 1 + 2^-10; rounded
  // to float first it lands on the tie, which goes to even (1.0), as in PyTorch.
  const double d = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(Half(static_cast<float>(d)).bits, 0x3C00);
  EXPECT_EQ(Half(d).bits, 0x3C00);
}

TEST(ScalarBFloat16, AllCodes) {
  check_all_codes(kBf16, [](uint32_t c) { return c | 0x40; });
}

TEST(ScalarBFloat16, Ties) { check_ties(kBf16); }

TEST(ScalarBFloat16, OverflowAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const float max = static_cast<float>(BFloat16::from_bits(0x7F7F));
  EXPECT_EQ(std::ldexp(static_cast<double>(max), -127), 2.0 - 0x1p-7);
  // The tie between the largest bf16 and 2^128 rounds to inf (even).
  const float tie = static_cast<float>(std::ldexp(2.0 - 0x1p-8, 127));
  EXPECT_EQ(BFloat16(std::nextafter(tie, 0.0f)).bits, 0x7F7F);
  EXPECT_EQ(BFloat16(tie).bits, 0x7F80);
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::max()).bits, 0x7F80);
  EXPECT_EQ(BFloat16(inf).bits, 0x7F80);
  EXPECT_EQ(BFloat16(-inf).bits, 0xFF80);
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::quiet_NaN()).bits, 0x7FC0);
  EXPECT_EQ(BFloat16(-std::numeric_limits<float>::quiet_NaN()).bits, 0xFFC0);
  // A NaN whose payload sits only in the low 16 bits must stay NaN, not become inf.
  EXPECT_EQ(BFloat16(std::bit_cast<float>(0x7F800001u)).bits, 0x7FC0);
  EXPECT_EQ(BFloat16(std::bit_cast<float>(0xFFFFFFFFu)).bits, 0xFFFF);
  EXPECT_EQ(BFloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::denorm_min()).bits, 0x0000);
  // Float subnormals round like any other value.
  EXPECT_EQ(BFloat16(std::bit_cast<float>(0x00018000u)).bits, 0x0002);
  EXPECT_EQ(BFloat16(std::bit_cast<float>(0x00008000u)).bits, 0x0000);
}

}  // namespace
