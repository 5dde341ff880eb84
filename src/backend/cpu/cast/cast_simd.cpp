// SIMD conversions between float32 and f16 / bf16 / fp8 / f64 over contiguous arrays,
// compiled once per Highway target and picked at run time.
//
// The narrow formats are encoded and decoded with integer lane operations that mirror
// kiln/scalar_types.h step by step, so every target gives the scalar result bit for bit
// (test_cast.cpp checks all codes on each target). Highway's own conversions are used
// only where they give the same bits: F16C for f16 on AVX2/AVX3, and DemoteTo for
// f64 -> f32 on SIMD targets. In Highway 1.0.3 the emulated f16 DemoteTo truncates and
// mishandles inf/NaN, the emulated f64 DemoteTo clamps inf to FLT_MAX, and bf16
// DemoteTo truncates on every target, so those are done here.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/cast/cast_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <kiln/scalar_types.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/common/codecs-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
// Internal linkage: other SIMD files may define helpers of the same names per target.
namespace {
namespace hn = hwy::HWY_NAMESPACE;

#if (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) && !defined(HWY_DISABLE_F16C)
constexpr bool kHardwareF16 = true;
#else
constexpr bool kHardwareF16 = false;
#endif
constexpr bool kIeeeDemoteF64 = HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;

// Codes of a kiln::detail::SmallFloat format (in u32 lanes) -> float32. As in
// SmallFloat::to_float: normal codes re-bias the exponent; subnormal codes are an
// integer times the subnormal unit (exact, and unaffected by denormals-are-zero
// because the integer is converted, not reinterpreted); specials are patched in last.
template <class Fmt>
HWY_INLINE VF DecodeSmallFloat(VU code) {
  const DF df;
  const DU du;
  const DI di;
  constexpr int kMan = Fmt::kManBits;
  const VU mag = hn::And(code, hn::Set(du, Fmt::kMagMask));
  const VU sign = hn::ShiftLeft<31 - Fmt::kExpBits - kMan>(hn::And(code, hn::Set(du, Fmt::kSignBit)));
  const VU normal = hn::Add(hn::ShiftLeft<23 - kMan>(mag), hn::Set(du, Fmt::kRebias));
  const VU subnormal =
      hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, mag)), hn::Set(df, Fmt::kSubnormalUnit)));
  VU bits = hn::IfThenElse(hn::Lt(mag, hn::Set(du, Fmt::kManMask + 1)), subnormal, normal);
  if constexpr (Fmt::kHasInf) {
    const VU quiet = hn::IfThenElseZero(hn::Gt(mag, hn::Set(du, Fmt::kInfCode)), hn::Set(du, 0x400000u));
    const VU special = hn::Or(hn::Or(hn::Set(du, 0x7F800000u), quiet),
                              hn::ShiftLeft<23 - kMan>(hn::And(mag, hn::Set(du, Fmt::kManMask))));
    bits = hn::IfThenElse(hn::Gt(mag, hn::Set(du, Fmt::kInfCode - 1)), special, bits);
  } else {
    bits = hn::IfThenElse(hn::Eq(mag, hn::Set(du, Fmt::kMagMask)), hn::Set(du, 0x7FC00000u), bits);
  }
  return hn::BitCast(df, hn::Or(bits, sign));
}

// float32 -> codes of a SmallFloat format (in u32 lanes), round to nearest even. The
// same steps as SmallFloat::from_float, with every branch computed and selected; the
// subnormal case shifts each lane's significand by its own amount.
template <class Fmt>
HWY_INLINE VU EncodeSmallFloat(VF v) {
  const DU du;
  constexpr int kMan = Fmt::kManBits;
  constexpr int kShift = 23 - kMan;
  const VU one = hn::Set(du, 1);
  const VU u = hn::BitCast(du, v);
  const VU a = hn::And(u, hn::Set(du, 0x7FFFFFFFu));
  const VU sign = hn::ShiftLeft<Fmt::kExpBits + kMan>(hn::ShiftRight<31>(u));

  // Wraps around for lanes below the normal range; those take `subnormal` instead.
  const VU r = hn::Sub(a, hn::Set(du, Fmt::kRebias));
  const VU normal = hn::ShiftRight<kShift>(
      hn::Add(hn::Add(r, hn::Set(du, (1u << (kShift - 1)) - 1)), hn::And(hn::ShiftRight<kShift>(r), one)));

  // Shifting by 25 rounds every significand to 0; clamping there also absorbs float
  // subnormals and the wrapped-around amounts of normal lanes.
  const VU shift = hn::Min(hn::Sub(hn::Set(du, 151u - Fmt::kBias - kMan), hn::ShiftRight<23>(a)), hn::Set(du, 25));
  const VU significand = hn::Or(hn::And(a, hn::Set(du, 0x7FFFFFu)), hn::Set(du, 0x800000u));
  const VU half_minus_one = hn::Sub(hn::ShiftRight<1>(hn::Shl(one, shift)), one);
  const VU subnormal =
      hn::Shr(hn::Add(hn::Add(significand, half_minus_one), hn::And(hn::Shr(significand, shift), one)), shift);

  VU code = hn::IfThenElse(hn::Lt(a, hn::Set(du, Fmt::kMinNormalF32)), subnormal, normal);
  code = hn::IfThenElse(hn::Gt(a, hn::Set(du, Fmt::kOverflowF32 - 1)), hn::Set(du, Fmt::kOverflowCode), code);
  VU nan_code = hn::Set(du, Fmt::kMagMask);
  if constexpr (Fmt::kKeepsNanPayload) {
    nan_code = hn::Or(hn::Set(du, Fmt::kInfCode | (1u << (kMan - 1))),
                      hn::And(hn::ShiftRight<kShift>(a), hn::Set(du, Fmt::kManMask)));
  }
  code = hn::IfThenElse(hn::Gt(a, hn::Set(du, 0x7F800000u)), nan_code, code);
  return hn::Or(code, sign);
}

// float32 -> bfloat16 bits in u32 lanes, as float_to_bf16_bits.
HWY_INLINE VU EncodeBf16(VF v) {
  const DU du;
  const VU u = hn::BitCast(du, v);
  const VU high = hn::ShiftRight<16>(u);
  const VU rounded = hn::ShiftRight<16>(hn::Add(hn::Add(u, hn::Set(du, 0x7FFFu)), hn::And(high, hn::Set(du, 1))));
  const VU quiet_nan = hn::Or(high, hn::Set(du, 0x40u));
  const auto is_nan = hn::Gt(hn::And(u, hn::Set(du, 0x7FFFFFFFu)), hn::Set(du, 0x7F800000u));
  return hn::IfThenElse(is_nan, quiet_nan, rounded);
}

// The loops handle whole vectors and leave the last n % lanes elements to the scalar
// conversion, which gives the same bits.

void F16ToF32(const uint16_t* src, float* dst, int64_t n) {
  const DF df;
  const DU du;
  const hn::Rebind<uint16_t, DF> du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    if constexpr (kHardwareF16) {
      hn::StoreU(codecs::LoadF16(df, src + i), df, dst + i);
    } else {
      hn::StoreU(DecodeSmallFloat<detail::HalfFormat>(hn::PromoteTo(du, hn::LoadU(du16, src + i))), df, dst + i);
    }
  }
  for (; i < n; ++i) dst[i] = half_bits_to_float(src[i]);
}

void F32ToF16(const float* src, uint16_t* dst, int64_t n) {
  const DF df;
  const DI di;
  const hn::Rebind<uint16_t, DF> du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VF v = hn::LoadU(df, src + i);
    if constexpr (kHardwareF16) {
      const hn::Rebind<hwy::float16_t, DF> df16;
      hn::StoreU(hn::BitCast(du16, hn::DemoteTo(df16, v)), du16, dst + i);
    } else {
      hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, EncodeSmallFloat<detail::HalfFormat>(v))), du16, dst + i);
    }
  }
  for (; i < n; ++i) dst[i] = float_to_half_bits(src[i]);
}

void Bf16ToF32(const uint16_t* src, float* dst, int64_t n) {
  const DF df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(codecs::LoadBf16(df, src + i), df, dst + i);
  for (; i < n; ++i) dst[i] = bf16_bits_to_float(src[i]);
}

void F32ToBf16(const float* src, uint16_t* dst, int64_t n) {
  const DF df;
  const DI di;
  const hn::Rebind<uint16_t, DF> du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    // Codes fit in 16 bits, so the saturating i32 -> u16 demotion is exact.
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, EncodeBf16(hn::LoadU(df, src + i)))), du16, dst + i);
  }
  for (; i < n; ++i) dst[i] = float_to_bf16_bits(src[i]);
}

template <class Fmt>
void Fp8ToF32(const uint8_t* src, float* dst, int64_t n) {
  const DF df;
  const DU du;
  const hn::Rebind<uint8_t, DF> du8;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(DecodeSmallFloat<Fmt>(hn::PromoteTo(du, hn::LoadU(du8, src + i))), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = Fmt::to_float(src[i]);
}

template <class Fmt>
void F32ToFp8(const float* src, uint8_t* dst, int64_t n) {
  const DF df;
  const DI di;
  const hn::Rebind<uint8_t, DF> du8;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const VU code = EncodeSmallFloat<Fmt>(hn::LoadU(df, src + i));
    hn::StoreU(hn::DemoteTo(du8, hn::BitCast(di, code)), du8, dst + i);
  }
  for (; i < n; ++i) dst[i] = static_cast<uint8_t>(Fmt::from_float(src[i]));
}

void E4m3fnToF32(const uint8_t* src, float* dst, int64_t n) { Fp8ToF32<detail::E4m3fnFormat>(src, dst, n); }
void E5m2ToF32(const uint8_t* src, float* dst, int64_t n) { Fp8ToF32<detail::E5m2Format>(src, dst, n); }
void F32ToE4m3fn(const float* src, uint8_t* dst, int64_t n) { F32ToFp8<detail::E4m3fnFormat>(src, dst, n); }
void F32ToE5m2(const float* src, uint8_t* dst, int64_t n) { F32ToFp8<detail::E5m2Format>(src, dst, n); }

void F32ToF64(const float* src, double* dst, int64_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::PromoteTo(dd, hn::LoadU(df, src + i)), dd, dst + i);
  for (; i < n; ++i) dst[i] = static_cast<double>(src[i]);
}

void F64ToF32(const double* src, float* dst, int64_t n) {
  int64_t i = 0;
  if constexpr (kIeeeDemoteF64) {
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
    for (; i + lanes <= n; i += lanes) hn::StoreU(hn::DemoteTo(df, hn::LoadU(dd, src + i)), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

}  // namespace
}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(F16ToF32);
HWY_EXPORT(F32ToF16);
HWY_EXPORT(Bf16ToF32);
HWY_EXPORT(F32ToBf16);
HWY_EXPORT(E4m3fnToF32);
HWY_EXPORT(E5m2ToF32);
HWY_EXPORT(F32ToE4m3fn);
HWY_EXPORT(F32ToE5m2);
HWY_EXPORT(F32ToF64);
HWY_EXPORT(F64ToF32);

void to_f32(DType src_type, const void* src, float* dst, int64_t n) {
  if (n <= 0) return;
  switch (src_type) {
    case DType::Float16:
      return HWY_DYNAMIC_DISPATCH(F16ToF32)(static_cast<const uint16_t*>(src), dst, n);
    case DType::BFloat16:
      return HWY_DYNAMIC_DISPATCH(Bf16ToF32)(static_cast<const uint16_t*>(src), dst, n);
    case DType::Float8_e4m3fn:
      return HWY_DYNAMIC_DISPATCH(E4m3fnToF32)(static_cast<const uint8_t*>(src), dst, n);
    case DType::Float8_e5m2:
      return HWY_DYNAMIC_DISPATCH(E5m2ToF32)(static_cast<const uint8_t*>(src), dst, n);
    case DType::Float64:
      return HWY_DYNAMIC_DISPATCH(F64ToF32)(static_cast<const double*>(src), dst, n);
    case DType::Float32:
      std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    default:
      return cast_strided(src_type, src, static_cast<int64_t>(itemsize(src_type)), DType::Float32, dst, sizeof(float),
                          n);
  }
}

void from_f32(const float* src, DType dst_type, void* dst, int64_t n) {
  if (n <= 0) return;
  switch (dst_type) {
    case DType::Float16:
      return HWY_DYNAMIC_DISPATCH(F32ToF16)(src, static_cast<uint16_t*>(dst), n);
    case DType::BFloat16:
      return HWY_DYNAMIC_DISPATCH(F32ToBf16)(src, static_cast<uint16_t*>(dst), n);
    case DType::Float8_e4m3fn:
      return HWY_DYNAMIC_DISPATCH(F32ToE4m3fn)(src, static_cast<uint8_t*>(dst), n);
    case DType::Float8_e5m2:
      return HWY_DYNAMIC_DISPATCH(F32ToE5m2)(src, static_cast<uint8_t*>(dst), n);
    case DType::Float64:
      return HWY_DYNAMIC_DISPATCH(F32ToF64)(src, static_cast<double*>(dst), n);
    case DType::Float32:
      std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    default:
      return cast_strided(DType::Float32, src, sizeof(float), dst_type, dst, static_cast<int64_t>(itemsize(dst_type)),
                          n);
  }
}

int64_t cast_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
