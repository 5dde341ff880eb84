// The fused attention-block entry for float8_e4m3fn projections with per-row or 128x128
// block scales, float32 activations (the kernel is in attention_entry_decode-inl.h).
#undef HWY_TARGET_INCLUDE
// AVX3_DL too, as gemv_fp8.cpp: the same FP8 decode as the unfused linear_fp8.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#define HWY_TARGET_INCLUDE "backend/cpu/decode_block/attention_entry_decode_fp8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/decode_block/attention_entry_decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void AttentionEntryDecodeFp8(const ExecutionContext& ctx, const AttentionEntryDecodeArgs& args) {
  WithFp8Decoder([&](auto dec) HWY_ATTR {
    using Dec = decltype(dec);
    if (args.q.scale_layout == Fp8ScaleLayout::Block128) {
      return RunAttentionEntryDecode<Dec, DType::Float32, true, true>(ctx, args);
    }
    RunAttentionEntryDecode<Dec, DType::Float32, true, false>(ctx, args);
  });
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(AttentionEntryDecodeFp8);

void attention_entry_decode_fp8(const ExecutionContext& ctx, const backend::AttentionEntryDecodeArgs& args) {
  HWY_DYNAMIC_DISPATCH(AttentionEntryDecodeFp8)(ctx, args);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
