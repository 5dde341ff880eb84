// The many-token MoE expert kernel for float32, bfloat16 and float16 expert weights (the
// kernel is in moe_experts_tiled-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/moe/moe_experts_tiled_wide.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/moe/moe_experts_tiled-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void MoeExpertsTiledWide(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan) {
  switch (args.weight_dtype) {
    case DType::Float32: return RunMoeExpertsTiled<F32Weights, false, false>(pool, args, plan);
    case DType::BFloat16: return RunMoeExpertsTiled<Bf16Weights, false, false>(pool, args, plan);
    case DType::Float16: return RunMoeExpertsTiled<F16Weights, false, false>(pool, args, plan);
    default: fail(ErrorKind::Type, "moe_experts", "unsupported expert weight dtype {}", dtype_name(args.weight_dtype));
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(MoeExpertsTiledWide);

void moe_experts_tiled_wide(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan) {
  HWY_DYNAMIC_DISPATCH(MoeExpertsTiledWide)(pool, args, plan);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
