// The fused MoE expert kernel for float32, bfloat16 and float16 expert weights (the
// kernel is in moe_experts-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/moe/moe_experts_wide.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/moe/moe_experts-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void MoeExpertsWide(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan) {
  switch (args.weight_dtype) {
    case DType::Float32: return RunMoeExperts<F32Weights, false, false>(pool, args, plan);
    case DType::BFloat16: return RunMoeExperts<Bf16Weights, false, false>(pool, args, plan);
    case DType::Float16: return RunMoeExperts<F16Weights, false, false>(pool, args, plan);
    default: fail(ErrorKind::Type, "moe_experts", "unsupported expert weight dtype {}", dtype_name(args.weight_dtype));
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(MoeExpertsWide);

void moe_experts_wide(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan) {
  HWY_DYNAMIC_DISPATCH(MoeExpertsWide)(pool, args, plan);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
