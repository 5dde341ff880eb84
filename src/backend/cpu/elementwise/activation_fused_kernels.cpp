// SIMD kernels of the fused activations (see activation_fused_kernels.h), compiled
// once per Highway target. The silu uses fast_exp-inl.h's exp (within 2 ulp) and one
// division; two vectors per iteration keep the exp chains overlapping.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/elementwise/activation_fused_kernels.cpp"
#include "backend/cpu/elementwise/activation_fused_kernels.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/common/fast_exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// y = a * silu(g), or y = silu(g) without a (a unused).
template <bool kMul, class T>
void MulSiluImpl(const T* a, const T* g, T* y, int64_t n_) {
  const hn::ScalableTag<T> d;
  const auto times_a = [&](auto s, const auto& a_vec) {
    if constexpr (kMul) {
      return hn::Mul(a_vec(), s);
    } else {
      return s;
    }
  };
  const size_t N = hn::Lanes(d), n = static_cast<size_t>(n_);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto y0 = times_a(Silu(d, hn::LoadU(d, g + i)), [&] { return hn::LoadU(d, a + i); });
    const auto y1 = times_a(Silu(d, hn::LoadU(d, g + i + N)), [&] { return hn::LoadU(d, a + i + N); });
    hn::StoreU(y0, d, y + i);
    hn::StoreU(y1, d, y + i + N);
  }
  for (; i < n; i += N) {
    // The tail through zero-padded buffers: the same arithmetic as the body.
    const size_t m = n - i < N ? n - i : N;
    HWY_ALIGN T ba[HWY_MAX_BYTES / sizeof(T)] = {};
    HWY_ALIGN T bg[HWY_MAX_BYTES / sizeof(T)] = {};
    if constexpr (kMul) std::memcpy(ba, a + i, m * sizeof(T));
    std::memcpy(bg, g + i, m * sizeof(T));
    hn::Store(times_a(Silu(d, hn::Load(d, bg)), [&] { return hn::Load(d, ba); }), d, ba);
    std::memcpy(y + i, ba, m * sizeof(T));
  }
}

void MulSiluF32(const float* a, const float* g, float* y, int64_t n) { MulSiluImpl<true>(a, g, y, n); }
void MulSiluF64(const double* a, const double* g, double* y, int64_t n) { MulSiluImpl<true>(a, g, y, n); }
void SiluF32(const float* x, float* y, int64_t n) { MulSiluImpl<false, float>(nullptr, x, y, n); }

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(MulSiluF32);
HWY_EXPORT(MulSiluF64);
HWY_EXPORT(SiluF32);

void mul_silu(const float* a, const float* g, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(MulSiluF32)(a, g, y, n); }
void mul_silu(const double* a, const double* g, double* y, int64_t n) { HWY_DYNAMIC_DISPATCH(MulSiluF64)(a, g, y, n); }
void silu(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(SiluF32)(x, y, n); }

int64_t activation_fused_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
