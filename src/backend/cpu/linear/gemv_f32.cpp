// One-row linear for float32 weights (kernel in gemv-inl.h), plus the x scratch size.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/linear/gemv_f32.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/linear/gemv-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void GemvF32(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch) {
  RunGemv<F32Weights, DType::Float32, false, false>(pool, w, act, x_scratch);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(GemvF32);

void gemv_f32(ThreadPool& pool, const LinearWeight& w, const LinearActivations& act, float* x_scratch) {
  HWY_DYNAMIC_DISPATCH(GemvF32)(pool, w, act, x_scratch);
}

// K rounded up to whole inner steps of the widest decoder (4 x 512 bits of floats).
int64_t gemv_scratch_floats(int64_t K) {
  constexpr int64_t kWidestStep = 64;
  return (K + kWidestStep - 1) / kWidestStep * kWidestStep;
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
