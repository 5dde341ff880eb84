// One-row linear for bfloat16 weights (kernel and decode notes in gemv-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/linear/gemv_bf16.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/linear/gemv-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void GemvBf16(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch) {
  RunGemv<Bf16Weights, DType::BFloat16, false, false>(pool, w, act, x_scratch);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(GemvBf16);

void gemv_bf16(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch) {
  HWY_DYNAMIC_DISPATCH(GemvBf16)(pool, w, act, x_scratch);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
