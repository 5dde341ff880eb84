// The fused MoE expert kernel for float8_e4m3fn expert weights with per-row or 128x128
// block scales (the kernel is in moe_experts-inl.h, the decodes in gemv-inl.h).
#undef HWY_TARGET_INCLUDE
// AVX3_DL too: its byte-table FP8 decode is the fastest (see gemv_fp8.cpp).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#define HWY_TARGET_INCLUDE "backend/cpu/moe/moe_experts_fp8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/moe/moe_experts-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void MoeExpertsFp8(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan) {
  WithFp8Decoder([&](auto dec) HWY_ATTR {
    using Dec = decltype(dec);
    if (args.scale_layout == Fp8ScaleLayout::Block128) return RunMoeExperts<Dec, true, true>(pool, args, plan);
    RunMoeExperts<Dec, true, false>(pool, args, plan);
  });
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(MoeExpertsFp8);

void moe_experts_fp8(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan) {
  HWY_DYNAMIC_DISPATCH(MoeExpertsFp8)(pool, args, plan);
}

// Built for the most targets (AVX3_DL too), a superset of moe_experts_wide.cpp's.
int64_t moe_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
