// One-row linear for float16 weights (kernel and decode notes in gemv-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/linear/gemv_f16.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/linear/gemv-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void GemvF16(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch) {
  RunGemv<F16Weights, DType::Float16, false, false>(pool, w, act, x_scratch);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(GemvF16);

void gemv_f16(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch) {
  HWY_DYNAMIC_DISPATCH(GemvF16)(pool, w, act, x_scratch);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
