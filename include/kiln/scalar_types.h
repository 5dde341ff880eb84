// Storage-only scalar types: float16, bfloat16, float8_e4m3fn, float8_e5m2.
//
// Each holds only its bits and converts exactly to float; conversion from float rounds
// to nearest even. Arithmetic happens in float ("compute wide, store narrow"), so these
// types deliberately have no operators of their own. Light header: no Highway.
//
// Semantics (PyTorch's, plus kiln's decisions in spec/ops-semantics.md):
//   float16, bfloat16: IEEE; finite overflow rounds to ±inf; a NaN keeps its sign and
//     the top bits of its payload and becomes quiet (as x86 F16C does).
//   float8_e5m2: IEEE-like (the top byte of a float16); overflow rounds to ±inf; every
//     NaN becomes 0x7F with its sign (as PyTorch does).
//   float8_e4m3fn: no infinities; the only NaN is S.1111.111. Finite overflow and ±inf
//     saturate to ±448; NaN becomes 0x7F with its sign.
//   Widening to float is exact. NaN codes widen to quiet float NaNs, except bfloat16,
//   which widens by a shift and so keeps its bits.
// A double converts through float first, as PyTorch does.
#pragma once

#include <bit>
#include <cstdint>

namespace kiln {

namespace detail {

// 2^k as a float, for -126 <= k <= 127.
constexpr float exp2_float(int k) { return std::bit_cast<float>(static_cast<uint32_t>(127 + k) << 23); }

// Rounds m / 2^shift to the nearest integer, ties to even (1 <= shift <= 31, m < 2^31).
constexpr uint32_t shift_right_rne(uint32_t m, uint32_t shift) {
  return (m + ((1u << (shift - 1)) - 1) + ((m >> shift) & 1)) >> shift;
}

// A binary float format with kExp exponent bits, kMan mantissa bits and a sign bit on
// top, IEEE bias. kIeeeSpecials: the all-ones exponent holds inf and NaN (f16, e5m2);
// otherwise only the all-ones code is NaN and there is no inf (e4m3fn).
// kNanPayload: a float NaN keeps the top bits of its payload (f16, as x86 F16C does);
// otherwise every NaN becomes the all-ones code with its sign (fp8, as PyTorch does).
template <int kExp, int kMan, bool kIeeeSpecials, bool kNanPayload>
struct SmallFloat {
  // The parameters again, for the SIMD versions in src/backend/cpu/cast_simd.cpp.
  static constexpr int kExpBits = kExp;
  static constexpr int kManBits = kMan;
  static constexpr bool kHasInf = kIeeeSpecials;
  static constexpr bool kKeepsNanPayload = kNanPayload;
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr uint32_t kSignBit = 1u << (kExp + kMan);
  static constexpr uint32_t kMagMask = kSignBit - 1;
  static constexpr uint32_t kManMask = (1u << kMan) - 1;
  static constexpr uint32_t kInfCode = ((1u << kExp) - 1) << kMan;  // IEEE formats only
  // Float bits of the smallest normal value of the format.
  static constexpr uint32_t kMinNormalF32 = static_cast<uint32_t>(127 - kBias + 1) << 23;
  // Subnormal codes are multiples of this unit.
  static constexpr float kSubnormalUnit = exp2_float(1 - kBias - kMan);
  // Re-biases float exponent bits to this format's.
  static constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << 23;

  // |f| (as float bits) at or above which the result is the overflow code: for IEEE
  // formats the midpoint between max finite and the next power of two (a tie that
  // rounds to the even code, inf); for e4m3fn the max finite 448, where saturation
  // begins. The overflow code is inf, or max finite (0x7E) for e4m3fn.
  static constexpr uint32_t kOverflowF32 =
      kIeeeSpecials
          ? (static_cast<uint32_t>(127 + (1 << kExp) - 2 - kBias) << 23) | (0x7FFFFFu >> (22 - kMan) << (22 - kMan))
          : (static_cast<uint32_t>(127 + (1 << kExp) - 1 - kBias) << 23) | ((kManMask - 1) << (23 - kMan));
  static constexpr uint32_t kOverflowCode = kIeeeSpecials ? kInfCode : kMagMask - 1;

  static constexpr uint32_t from_float(float x) {
    const uint32_t u = std::bit_cast<uint32_t>(x);
    const uint32_t sign = (u >> 31) << (kExp + kMan);
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
      if constexpr (kNanPayload)
        return sign | kInfCode | (1u << (kMan - 1)) | ((a >> (23 - kMan)) & kManMask);
      else
        return sign | kMagMask;
    }
    if (a >= kOverflowF32) return sign | kOverflowCode;
    if (a >= kMinNormalF32) return sign | shift_right_rne(a - kRebias, 23 - kMan);
    // Subnormal (or zero) result: the 24-bit significand 1.m times 2^(e - 150), counted
    // in units of 2^(1 - kBias - kMan), is the significand shifted right by `shift`.
    // Float subnormals (e == 0) and anything shifted by more than 24 round to zero.
    const uint32_t shift = 151 - kBias - kMan - (a >> 23);
    if (shift > 24) return sign;
    return sign | shift_right_rne((a & 0x7FFFFFu) | 0x800000u, shift);
  }

  static constexpr float to_float(uint32_t code) {
    const uint32_t sign = (code & kSignBit) ? 0x80000000u : 0u;
    const uint32_t mag = code & kMagMask;
    if constexpr (kIeeeSpecials) {
      if (mag >= kInfCode) {
        const uint32_t quiet = mag > kInfCode ? 0x400000u : 0u;
        return std::bit_cast<float>(sign | 0x7F800000u | quiet | ((mag & kManMask) << (23 - kMan)));
      }
    } else {
      if (mag == kMagMask) return std::bit_cast<float>(sign | 0x7FC00000u);
    }
    if (mag <= kManMask) {
      const float v = static_cast<float>(mag) * kSubnormalUnit;
      return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | ((mag << (23 - kMan)) + kRebias));
  }
};

using HalfFormat = SmallFloat<5, 10, true, true>;
using E5m2Format = SmallFloat<5, 2, true, false>;
using E4m3fnFormat = SmallFloat<4, 3, false, false>;

}  // namespace detail

constexpr float half_bits_to_float(uint16_t bits) { return detail::HalfFormat::to_float(bits); }
constexpr uint16_t float_to_half_bits(float x) { return static_cast<uint16_t>(detail::HalfFormat::from_float(x)); }

// bfloat16 is the top half of a float, so widening is a shift and keeps any NaN as is.
constexpr float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
constexpr uint16_t float_to_bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  // Round to nearest even; a carry out of the mantissa bumps the exponent, which
  // turns values past the largest bfloat16 into inf as IEEE requires.
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

constexpr float fp8_e4m3fn_bits_to_float(uint8_t bits) { return detail::E4m3fnFormat::to_float(bits); }
constexpr uint8_t float_to_fp8_e4m3fn_bits(float x) {
  return static_cast<uint8_t>(detail::E4m3fnFormat::from_float(x));
}

constexpr float fp8_e5m2_bits_to_float(uint8_t bits) { return detail::E5m2Format::to_float(bits); }
constexpr uint8_t float_to_fp8_e5m2_bits(float x) { return static_cast<uint8_t>(detail::E5m2Format::from_float(x)); }

// A value stored in a narrow float format: only its bits, converted exactly through
// float. Each format is its own type (Half and BFloat16 share a bit width, not values).
template <typename Bits, Bits (*Encode)(float), float (*Decode)(Bits)>
struct NarrowFloat {
  Bits bits = 0;
  NarrowFloat() = default;
  explicit constexpr NarrowFloat(float x) : bits(Encode(x)) {}
  constexpr operator float() const { return Decode(bits); }
  static constexpr NarrowFloat from_bits(Bits b) {
    NarrowFloat v;
    v.bits = b;
    return v;
  }
};

using Half = NarrowFloat<uint16_t, float_to_half_bits, half_bits_to_float>;
using BFloat16 = NarrowFloat<uint16_t, float_to_bf16_bits, bf16_bits_to_float>;
using Float8_e4m3fn = NarrowFloat<uint8_t, float_to_fp8_e4m3fn_bits, fp8_e4m3fn_bits_to_float>;
using Float8_e5m2 = NarrowFloat<uint8_t, float_to_fp8_e5m2_bits, fp8_e5m2_bits_to_float>;

// Side of the square weight blocks that share one scale in Hugging Face FP8 checkpoints
// (`weight_block_size: [128, 128]`): the block scale layout of linear_fp8, moe_experts and
// the model loader.
inline constexpr int64_t kFp8ScaleBlock = 128;

}  // namespace kiln
