// float8_e4m3fn -> bfloat16 bit patterns (and float32), the one FP8 decoder of the CPU
// kernels (internal; included once per Highway target). The one-row linear and MoE
// decode kernels (linear/gemv-inl.h), the packed FP8 expert tiles (moe_experts_tiled-inl.h)
// and the widening of FP8 weight panels for sgemm (linear/gemv_fp8.cpp) all decode here;
// fp8_decode.h exports array versions.
//
// Every e4m3fn value is exactly a bfloat16 value: sign, a 4-bit exponent (bias 7, bf16's
// is 127) and 3 mantissa bits; the subnormals m * 2^-9 are normal in bf16. So a code
// widens to the bf16 pattern
//   s | (e + 120 + L) << 7 | m << 4          for e >= 1,
//   s | bf16(m * 2^(L - 9))                  for e == 0 (zero and the subnormals),
// where the decoded value is the real one times 2^L (a policy, below). With L = -8 the
// exponent offset is 112, whose low 4 bits are zero, so the first line is an OR (one
// AVX-512 ternary-logic instruction with the mask); the e == 0 codes get an XOR fix from
// an 8-entry table. Float32 is the bf16 pattern shifted up 16 bits.
//
// No decoded value is a float32 denormal (the smallest is 2^(L-9)), so DAZ/FTZ settings
// cannot change results. Per target, each step decodes StepCodes() codes:
//   AVX3_DL (AVX-512 VBMI): two 128-entry byte-table lookups (vpermi2b) give the high and
//     low byte of every pattern, the sign is OR-ed into the high byte, two byte unpacks
//     make the words: 5 instructions per 64 codes in the "native" word order (what the
//     one-row kernels consume, see NativeSource), one vpermb more for natural order, and
//     four 16-bit unpacks with zero for float32 in natural order.
//   AVX3: sign-extend the bytes to 16 bits, << 4, & 0x87FF | bias (ternary logic), a
//     vpermw lookup of the e == 0 fix: 6 instructions per 32 codes, natural order.
//   AVX2 float32: sign-extend, << 7, & 0xBF80 is the f16 code of the value times 2^-8
//     (f16's exponent bias is 8 more than e4m3's and its subnormals cover e4m3's), then
//     F16C: 5 instructions per 16 codes.
//   Every other SIMD target (and AVX2 bf16): the AVX3 steps in portable Highway
//     operations, the fix looked up with TableLookupBytes (within each 128-bit block).
//   HWY_SCALAR: a 256-entry table.
//
// Policies (template parameter P): Policy<kLog2Scale, kExactNan>.
//   Kernel = Policy<-8, false>: what every FP8 kernel reads. The 2^8 is folded into the
//     row or block scale, and the NaN codes 0x7F / 0xFF read as ±480 (the pattern
//     continues past 448): quantisation never produces them, so the kernels spend no
//     instruction on them (docs in gemv-inl.h).
//   Exact = Policy<0, true>: the real value, NaN codes as quiet NaN with their sign
//     (bf16 0x7FC0 | s), i.e. float_to_bf16_bits(fp8_e4m3fn_bits_to_float(code)).

#if defined(KILN_BACKEND_CPU_COMMON_FP8_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_COMMON_FP8_DECODE_INL_H_
#undef KILN_BACKEND_CPU_COMMON_FP8_DECODE_INL_H_
#else
#define KILN_BACKEND_CPU_COMMON_FP8_DECODE_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>

#include "kiln/scalar_types.h"

// Target-independent part: the policies and the scalar patterns the tables hold.
#ifndef KILN_FP8_DECODE_POLICY_DEFINED
#define KILN_FP8_DECODE_POLICY_DEFINED
namespace kiln::cpu::fp8_decode {

template <int kLog2Scale_, bool kExactNan_>
struct Policy {
  // Decoded values stay normal, finite bf16 for |L| <= 64.
  static_assert(kLog2Scale_ >= -64 && kLog2Scale_ <= 64, "fp8 decode: scale exponent out of range");
  static constexpr int kLog2Scale = kLog2Scale_;
  static constexpr bool kExactNan = kExactNan_;
  // Exponent offset of the normal codes, in place (bits 14..7).
  static constexpr uint16_t kBias = static_cast<uint16_t>((120 + kLog2Scale) << 7);
  // The normal-code formula needs an add unless the offset's low 4 bits are zero.
  static constexpr bool kBiasIsOr = ((120 + kLog2Scale) & 0xF) == 0;
};
using Kernel = Policy<-8, false>;
using Exact = Policy<0, true>;

// The bf16 pattern of e4m3fn `code` under policy P (sign included).
template <class P>
constexpr uint16_t Bf16Pattern(uint8_t code) {
  const uint16_t sign = static_cast<uint16_t>((code & 0x80u) << 8);
  const int mag = code & 0x7F;
  if (mag == 0x7F) {
    if (P::kExactNan) return static_cast<uint16_t>(sign | 0x7FC0u);
    return static_cast<uint16_t>(sign | float_to_bf16_bits(480.0f * kiln::detail::exp2_float(P::kLog2Scale)));
  }
  const int e = mag >> 3, m = mag & 7;
  const float value = e == 0 ? static_cast<float>(m) * kiln::detail::exp2_float(P::kLog2Scale - 9)
                             : static_cast<float>(8 + m) * kiln::detail::exp2_float(e - 10 + P::kLog2Scale);
  return static_cast<uint16_t>(sign | float_to_bf16_bits(value));
}

// What the normal-code formula gives for magnitude `mag` (no sign).
template <class P>
constexpr uint16_t NormalFormula(int mag) {
  return static_cast<uint16_t>((mag << 4) + P::kBias);
}

// XOR that turns the formula's pattern of an e == 0 code (magnitude m < 8) into the right
// one; the sign bit is untouched. 8 entries (16 bytes, one TableLookupBytes table).
template <class P>
struct SubnormalFix {
  alignas(64) uint16_t x[32] = {};
  constexpr SubnormalFix() {
    for (int m = 0; m < 8; ++m) x[m] = static_cast<uint16_t>(NormalFormula<P>(m) ^ Bf16Pattern<P>(static_cast<uint8_t>(m)));
  }
};
template <class P>
inline constexpr SubnormalFix<P> kSubnormalFix{};

// Every code's pattern (the HWY_SCALAR decoder).
template <class P>
struct PatternTable {
  uint16_t x[256] = {};
  constexpr PatternTable() {
    for (int c = 0; c < 256; ++c) x[c] = Bf16Pattern<P>(static_cast<uint8_t>(c));
  }
};
template <class P>
inline constexpr PatternTable<P> kPatternTable{};

// High (kByte 1) or low (kByte 0) byte of the magnitude codes' patterns (sign excluded).
template <class P, int kByte>
struct MagnitudeByteTable {
  alignas(64) uint8_t bytes[128] = {};
  constexpr MagnitudeByteTable() {
    for (int m = 0; m < 128; ++m) {
      bytes[m] = static_cast<uint8_t>(Bf16Pattern<P>(static_cast<uint8_t>(m)) >> (8 * kByte));
    }
  }
};
template <class P, int kByte>
inline constexpr MagnitudeByteTable<P, kByte> kMagnitudeBytes{};

}  // namespace kiln::cpu::fp8_decode
#endif  // KILN_FP8_DECODE_POLICY_DEFINED

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace fp8 {
namespace hn = hwy::HWY_NAMESPACE;
using fp8_decode::Exact;
using fp8_decode::Kernel;

using DU16 = hn::ScalableTag<uint16_t>;
using VU16 = hn::Vec<DU16>;
using DF32 = hn::ScalableTag<float>;
using VF32 = hn::Vec<DF32>;

#if HWY_TARGET == HWY_AVX3_DL
// bf16 vectors per step (Bf16, Bf16Native) and float32 vectors per step (F32).
constexpr int kBf16Vecs = 2;
constexpr int kF32Vecs = 4;
#else
constexpr int kBf16Vecs = 1;
constexpr int kF32Vecs = 2;
#endif

// Codes one Bf16 / Bf16Native step decodes, and one F32 step.
HWY_INLINE size_t Bf16StepCodes() { return kBf16Vecs * hn::Lanes(DU16()); }
HWY_INLINE size_t F32StepCodes() { return kF32Vecs * hn::Lanes(DF32()); }

#if HWY_TARGET == HWY_AVX3_DL
namespace detail {
// Word w (of the 2 * 32 a step makes) of the native order holds code NativeSourceOf(w).
constexpr int NativeSourceOf(int w) {
  const int v = w / 32, j = w % 32;
  return 16 * (j / 8) + 8 * v + j % 8;
}
// vpermb indices that put codes where the native decode then yields natural words.
struct NaturalWordIndex {
  alignas(64) uint8_t x[64] = {};
  constexpr NaturalWordIndex() {
    for (int w = 0; w < 64; ++w) x[NativeSourceOf(w)] = static_cast<uint8_t>(w);
  }
};
// ... and natural float32 after the 16-bit unpacks with zero: float vector q = 2v + h,
// lane 4b + t comes from word 8b + 4h + t of native word vector v.
struct NaturalF32Index {
  alignas(64) uint8_t x[64] = {};
  constexpr NaturalF32Index() {
    for (int v = 0; v < 2; ++v) {
      for (int h = 0; h < 2; ++h) {
        for (int b = 0; b < 4; ++b) {
          for (int t = 0; t < 4; ++t) {
            x[NativeSourceOf(32 * v + 8 * b + 4 * h + t)] = static_cast<uint8_t>(16 * (2 * v + h) + 4 * b + t);
          }
        }
      }
    }
  }
};
inline constexpr NaturalWordIndex kNaturalWordIndex{};
inline constexpr NaturalF32Index kNaturalF32Index{};

// 64 codes (any order) -> their patterns, in native word order.
template <class P>
HWY_INLINE void TableDecode(__m512i codes, VU16* out) {
  const __m512i high_table0 = _mm512_load_si512(fp8_decode::kMagnitudeBytes<P, 1>.bytes);
  const __m512i high_table1 = _mm512_load_si512(fp8_decode::kMagnitudeBytes<P, 1>.bytes + 64);
  const __m512i low_table0 = _mm512_load_si512(fp8_decode::kMagnitudeBytes<P, 0>.bytes);
  const __m512i low_table1 = _mm512_load_si512(fp8_decode::kMagnitudeBytes<P, 0>.bytes + 64);
  // vpermi2b ignores bit 7 of each index; A | (B & C) is ternary-logic table 0xF8.
  const __m512i high = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(high_table0, codes, high_table1), codes,
                                                 _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);
  const __m512i low = _mm512_permutex2var_epi8(low_table0, codes, low_table1);
  out[0] = VU16{_mm512_unpacklo_epi8(low, high)};
  out[1] = VU16{_mm512_unpackhi_epi8(low, high)};
}
}  // namespace detail

// The step offset (0 .. Bf16StepCodes()) that native word w holds.
HWY_INLINE int NativeSource(int w) { return detail::NativeSourceOf(w); }

template <class P>
HWY_INLINE void Bf16Native(const uint8_t* HWY_RESTRICT p, VU16* out) {
  detail::TableDecode<P>(_mm512_loadu_si512(p), out);
}

template <class P>
HWY_INLINE void Bf16(const uint8_t* HWY_RESTRICT p, VU16* out) {
  const __m512i index = _mm512_load_si512(detail::kNaturalWordIndex.x);
  detail::TableDecode<P>(_mm512_permutexvar_epi8(index, _mm512_loadu_si512(p)), out);
}

template <class P>
HWY_INLINE void F32(const uint8_t* HWY_RESTRICT p, VF32* out) {
  const __m512i index = _mm512_load_si512(detail::kNaturalF32Index.x);
  VU16 words[2];
  detail::TableDecode<P>(_mm512_permutexvar_epi8(index, _mm512_loadu_si512(p)), words);
  const __m512i zero = _mm512_setzero_si512();
  for (int v = 0; v < 2; ++v) {
    out[2 * v] = VF32{_mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, words[v].raw))};
    out[2 * v + 1] = VF32{_mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, words[v].raw))};
  }
}

#else  // every target but AVX3_DL: natural order is native

HWY_INLINE int NativeSource(int w) { return w; }

template <class P>
HWY_INLINE void Bf16(const uint8_t* HWY_RESTRICT p, VU16* out) {
#if HWY_TARGET == HWY_SCALAR
  out[0] = hn::Set(DU16(), fp8_decode::kPatternTable<P>.x[p[0]]);
#elif HWY_TARGET == HWY_AVX3
  const __m512i s = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  __m512i normal;
  if constexpr (P::kBiasIsOr) {
    // (A & B) | C is ternary-logic table 0xEA.
    normal = _mm512_ternarylogic_epi32(_mm512_slli_epi16(s, 4), _mm512_set1_epi16(0x87FF),
                                       _mm512_set1_epi16(static_cast<short>(P::kBias)), 0xEA);
  } else {
    normal = _mm512_add_epi16(_mm512_and_si512(_mm512_slli_epi16(s, 4), _mm512_set1_epi16(0x87FF)),
                              _mm512_set1_epi16(static_cast<short>(P::kBias)));
  }
  // The index is the low 5 bits, 00mmm for e == 0.
  const __mmask32 exponent_zero = _mm512_testn_epi16_mask(s, _mm512_set1_epi16(0x78));
  const __m512i fix = _mm512_maskz_permutexvar_epi16(exponent_zero, s, _mm512_load_si512(fp8_decode::kSubnormalFix<P>.x));
  __m512i bits = _mm512_xor_si512(normal, fix);
  if constexpr (P::kExactNan) {
    const __mmask32 nan = _mm512_cmpeq_epi16_mask(_mm512_and_si512(s, _mm512_set1_epi16(0x7F)), _mm512_set1_epi16(0x7F));
    bits = _mm512_mask_blend_epi16(
        nan, bits, _mm512_or_si512(_mm512_and_si512(s, _mm512_set1_epi16(static_cast<short>(0x8000))),
                                   _mm512_set1_epi16(0x7FC0)));
  }
  out[0] = VU16{bits};
#else
  const DU16 du16;
  const hn::RebindToSigned<DU16> di16;
  const hn::Rebind<int8_t, DU16> di8;
  const VU16 s = hn::BitCast(du16, hn::PromoteTo(di16, hn::LoadU(di8, reinterpret_cast<const int8_t*>(p))));
  const VU16 masked = hn::And(hn::ShiftLeft<4>(s), hn::Set(du16, 0x87FF));
  VU16 bits = P::kBiasIsOr ? hn::Or(masked, hn::Set(du16, P::kBias)) : hn::Add(masked, hn::Set(du16, P::kBias));
  const auto exponent_zero = hn::Eq(hn::And(s, hn::Set(du16, 0x78)), hn::Zero(du16));
  // Byte indices (2m, 2m + 1) of entry m of the 16-byte fix table, in every block.
  const VU16 m2 = hn::And(hn::ShiftLeft<1>(s), hn::Set(du16, 0x000E));
  const VU16 index = hn::Or(hn::Or(m2, hn::ShiftLeft<8>(m2)), hn::Set(du16, 0x0100));
  const VU16 fix = hn::TableLookupBytes(hn::LoadDup128(du16, fp8_decode::kSubnormalFix<P>.x), index);
  bits = hn::Xor(bits, hn::IfThenElseZero(exponent_zero, fix));
  if constexpr (P::kExactNan) {
    const auto nan = hn::Eq(hn::And(s, hn::Set(du16, 0x7F)), hn::Set(du16, 0x7F));
    bits = hn::IfThenElse(nan, hn::Or(hn::And(s, hn::Set(du16, 0x8000)), hn::Set(du16, 0x7FC0)), bits);
  }
  out[0] = bits;
#endif
}

template <class P>
HWY_INLINE void Bf16Native(const uint8_t* HWY_RESTRICT p, VU16* out) {
  Bf16<P>(p, out);
}

template <class P>
HWY_INLINE void F32(const uint8_t* HWY_RESTRICT p, VF32* out) {
  const DF32 df;
  [[maybe_unused]] const hn::RebindToUnsigned<DF32> du32;
#if HWY_TARGET == HWY_SCALAR
  out[0] = hn::BitCast(df, hn::Set(du32, uint32_t{fp8_decode::kPatternTable<P>.x[p[0]]} << 16));
  out[1] = hn::BitCast(df, hn::Set(du32, uint32_t{fp8_decode::kPatternTable<P>.x[p[1]]} << 16));
#elif HWY_TARGET == HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  const hn::Repartition<int16_t, DF32> di16;  // 2L lanes
  const hn::Rebind<int8_t, decltype(di16)> di8;
  const hn::Half<decltype(di16)> dh16;
  const hn::Rebind<hwy::float16_t, decltype(dh16)> df16;
  const auto wide = hn::PromoteTo(di16, hn::LoadU(di8, reinterpret_cast<const int8_t*>(p)));
  // Sign-extended s sss...s eeee mmm << 7 puts the sign in bit 15, eeee mmm in bits
  // 13..7 and a copy of the sign in bit 14, which the mask clears.
  auto f16_bits = hn::And(hn::ShiftLeft<7>(wide), hn::Set(di16, static_cast<int16_t>(0xBF80)));
  if constexpr (P::kExactNan) {
    const auto nan = hn::Eq(hn::And(wide, hn::Set(di16, 0x7F)), hn::Set(di16, 0x7F));
    f16_bits = hn::IfThenElse(nan, hn::Or(hn::And(wide, hn::Set(di16, static_cast<int16_t>(0x8000))),
                                          hn::Set(di16, 0x7E00)),
                              f16_bits);
  }
  out[0] = hn::PromoteTo(df, hn::BitCast(df16, hn::LowerHalf(dh16, f16_bits)));
  out[1] = hn::PromoteTo(df, hn::BitCast(df16, hn::UpperHalf(dh16, f16_bits)));
  if constexpr (P::kLog2Scale != -8) {
    // The f16 code is the value times 2^-8; a power of two more is exact (NaN stays NaN).
    const VF32 rescale = hn::Set(df, kiln::detail::exp2_float(P::kLog2Scale + 8));
    out[0] = hn::Mul(out[0], rescale);
    out[1] = hn::Mul(out[1], rescale);
  }
#else
  const hn::Half<DU16> dh16;
  VU16 words;
  Bf16<P>(p, &words);
  out[0] = hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LowerHalf(dh16, words))));
  out[1] = hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::UpperHalf(dh16, words))));
#endif
}

#endif  // HWY_TARGET == HWY_AVX3_DL

}  // namespace fp8
}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
