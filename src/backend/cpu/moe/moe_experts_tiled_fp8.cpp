// The many-token MoE expert kernel for float8_e4m3fn expert weights with per-row or
// 128x128 block scales (the kernel is in moe_experts_tiled-inl.h, the decodes in
// gemv-inl.h).
#undef HWY_TARGET_INCLUDE
// AVX3_DL too, as for the decode kernel (moe_experts_fp8.cpp): its byte-table decode.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#define HWY_TARGET_INCLUDE "backend/cpu/moe/moe_experts_tiled_fp8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/moe/moe_experts_tiled-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void MoeExpertsTiledFp8(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan) {
  if (args.scale_layout == Fp8ScaleLayout::Block128) return RunMoeExpertsTiled<Fp8Weights, true, true>(pool, args, plan);
  RunMoeExpertsTiled<Fp8Weights, true, false>(pool, args, plan);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(MoeExpertsTiledFp8);

void moe_experts_tiled_fp8(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan) {
  HWY_DYNAMIC_DISPATCH(MoeExpertsTiledFp8)(pool, args, plan);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
