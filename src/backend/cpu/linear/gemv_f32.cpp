// One-row linear for float32 weights (kernel in gemv-inl.h), plus what every GEMV caller
// shares: the x scratch size and the kernel of each weight dtype.
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
  return ceil_div(K, kWidestStep) * kWidestStep;
}

GemvFn gemv_for(DType weight_dtype) {
  switch (weight_dtype) {
    case DType::Float32: return &gemv_f32;
    case DType::BFloat16: return &gemv_bf16;
    case DType::Float16: return &gemv_f16;
    case DType::Float8_e4m3fn: return &gemv_fp8;
    default: return nullptr;
  }
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
