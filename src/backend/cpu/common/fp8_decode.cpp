// Array versions of the FP8 decoder (fp8_decode.h): whole steps through the SIMD decode,
// the last partial step through a zero-padded buffer, so every code goes through the same
// instructions whatever n is.
#undef HWY_TARGET_INCLUDE
// AVX3_DL too: its byte-table decode (Highway 1.0.3 builds that target only on request).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#define HWY_TARGET_INCLUDE "backend/cpu/common/fp8_decode.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "backend/cpu/common/fp8_decode-inl.h"
#include "backend/cpu/common/fp8_decode.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

// Codes of the largest step of any target (AVX3_DL: 64).
constexpr size_t kMaxStepCodes = 4 * HWY_MAX_BYTES / sizeof(float);

static_assert(kFp8KernelDecodedPerReal == kiln::detail::exp2_float(fp8::Kernel::kLog2Scale),
              "fp8_decode.h's constant is the Kernel policy's scale");

template <class P>
void ToBf16(const uint8_t* src, uint16_t* dst, int64_t n) {
  const fp8::DU16 du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(du16));
  const int64_t step = static_cast<int64_t>(fp8::Bf16StepCodes());
  fp8::VU16 words[fp8::kBf16Vecs];
  int64_t i = 0;
  for (; i + step <= n; i += step) {
    fp8::Bf16<P>(src + i, words);
    for (int v = 0; v < fp8::kBf16Vecs; ++v) hn::StoreU(words[v], du16, dst + i + v * lanes);
  }
  if (i < n) {
    HWY_ALIGN uint8_t codes[kMaxStepCodes] = {};
    HWY_ALIGN uint16_t out[kMaxStepCodes];
    std::memcpy(codes, src + i, static_cast<size_t>(n - i));
    fp8::Bf16<P>(codes, words);
    for (int v = 0; v < fp8::kBf16Vecs; ++v) hn::Store(words[v], du16, out + v * lanes);
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

template <class P>
void ToF32(const uint8_t* src, float* dst, int64_t n) {
  const fp8::DF32 df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t step = static_cast<int64_t>(fp8::F32StepCodes());
  fp8::VF32 values[fp8::kF32Vecs];
  int64_t i = 0;
  for (; i + step <= n; i += step) {
    fp8::F32<P>(src + i, values);
    for (int v = 0; v < fp8::kF32Vecs; ++v) hn::StoreU(values[v], df, dst + i + v * lanes);
  }
  if (i < n) {
    HWY_ALIGN uint8_t codes[kMaxStepCodes] = {};
    HWY_ALIGN float out[kMaxStepCodes];
    std::memcpy(codes, src + i, static_cast<size_t>(n - i));
    fp8::F32<P>(codes, values);
    for (int v = 0; v < fp8::kF32Vecs; ++v) hn::Store(values[v], df, out + v * lanes);
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(float));
  }
}

}  // namespace

void Fp8ToBf16(const uint8_t* src, uint16_t* dst, int64_t n, Fp8Decode mode) {
  if (mode == Fp8Decode::Exact) return ToBf16<fp8::Exact>(src, dst, n);
  ToBf16<fp8::Kernel>(src, dst, n);
}

void Fp8ToF32(const uint8_t* src, float* dst, int64_t n, Fp8Decode mode) {
  if (mode == Fp8Decode::Exact) return ToF32<fp8::Exact>(src, dst, n);
  ToF32<fp8::Kernel>(src, dst, n);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(Fp8ToBf16);
HWY_EXPORT(Fp8ToF32);

void fp8_e4m3fn_to_bf16(const uint8_t* src, uint16_t* dst, int64_t n, Fp8Decode mode) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(Fp8ToBf16)(src, dst, n, mode);
}

void fp8_e4m3fn_to_f32(const uint8_t* src, float* dst, int64_t n, Fp8Decode mode) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(Fp8ToF32)(src, dst, n, mode);
}

int64_t fp8_decode_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
