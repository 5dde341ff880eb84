// The fused attention-block entry for float32, bfloat16 and float16 projections (the
// kernel is in attention_entry_decode-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/decode_block/attention_entry_decode_wide.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/decode_block/attention_entry_decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void AttentionEntryDecodeWide(const ExecutionContext& ctx, const AttentionEntryDecodeArgs& args) {
  switch (args.q.dtype) {
    case DType::Float32: return RunAttentionEntryDecode<F32Weights, DType::Float32, false, false>(ctx, args);
    case DType::BFloat16: return RunAttentionEntryDecode<Bf16Weights, DType::BFloat16, false, false>(ctx, args);
    case DType::Float16: return RunAttentionEntryDecode<F16Weights, DType::Float16, false, false>(ctx, args);
    default: fail(ErrorKind::Type, "attention_entry_decode", "unsupported weight dtype {}", dtype_name(args.q.dtype));
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(AttentionEntryDecodeWide);

void attention_entry_decode_wide(const ExecutionContext& ctx, const backend::AttentionEntryDecodeArgs& args) {
  HWY_DYNAMIC_DISPATCH(AttentionEntryDecodeWide)(ctx, args);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
