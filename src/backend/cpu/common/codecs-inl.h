// Narrow-float decoding shared by every SIMD kernel (internal; included once per Highway
// target). bf16, f16 and FP8 are storage formats: kernels widen them to float32 right
// after loading ("compute wide, store narrow"), and they all widen the same way here.
// FP8 (e4m3fn) has its own decoder, fp8_decode-inl.h, shared by every FP8 kernel.

#if defined(KILN_BACKEND_CPU_COMMON_CODECS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_COMMON_CODECS_INL_H_
#undef KILN_BACKEND_CPU_COMMON_CODECS_INL_H_
#else
#define KILN_BACKEND_CPU_COMMON_CODECS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <type_traits>

#include "kiln/scalar_types.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace codecs {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes(d) bf16 bit patterns at p as float32: bf16 is the high half of a float32, so the
// bits are widened and shifted up (exact, NaN payloads kept).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadBf16(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

// Lanes(d) IEEE half bit patterns at p as float32 (F16C where the target has it).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF16(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::Rebind<hwy::float16_t, DF> df16;
  const auto widened = hn::PromoteTo(df, hn::BitCast(df16, hn::LoadU(du16, p)));
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || (HWY_ARCH_X86 && HWY_TARGET >= HWY_SSE4) || \
    defined(HWY_DISABLE_F16C)
  // Highway 1.0 emulates the conversion on these targets by re-biasing the exponent
  // only, which turns inf and NaN (exponent 31) into finite numbers near 2^16: those
  // codes are rebuilt here as float32 inf / NaN with the sign and mantissa kept.
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::PromoteTo(du, hn::LoadU(du16, p));
  const auto is_special = hn::Eq(hn::And(bits, hn::Set(du, 0x7C00u)), hn::Set(du, 0x7C00u));
  const auto special = hn::Or(hn::Or(hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u))), hn::Set(du, 0x7F800000u)),
                              hn::ShiftLeft<13>(hn::And(bits, hn::Set(du, 0x3FFu))));
  return hn::IfThenElse(hn::RebindMask(df, is_special), hn::BitCast(df, special), widened);
#else
  return widened;
#endif
}

// Lanes(d) elements of storage type T at p in d's lane type: T is the lane type itself
// (float or double), or kiln's BFloat16 / Half (d float32).
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadWidened(D d, const T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, hn::TFromD<D>>) {
    return hn::LoadU(d, p);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return LoadBf16(d, reinterpret_cast<const uint16_t*>(p));
  } else {
    static_assert(std::is_same_v<T, Half>, "LoadWidened: float, double, BFloat16 or Half storage");
    return LoadF16(d, reinterpret_cast<const uint16_t*>(p));
  }
}

}  // namespace codecs
}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
