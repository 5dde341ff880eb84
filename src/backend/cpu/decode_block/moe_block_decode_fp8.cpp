// The fused MoE decode block for float8_e4m3fn expert weights with per-row or 128x128
// block scales (the kernel is in moe_block_decode-inl.h).
#undef HWY_TARGET_INCLUDE
// AVX3_DL too, as moe_experts_fp8.cpp: the same FP8 decode as the unfused kernel.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#define HWY_TARGET_INCLUDE "backend/cpu/decode_block/moe_block_decode_fp8.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/decode_block/moe_block_decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void MoeBlockDecodeFp8(const ExecutionContext& ctx, const MoeBlockDecodeArgs& args) {
  WithFp8Decoder([&](auto dec) HWY_ATTR {
    using Dec = decltype(dec);
    if (args.scale_layout == Fp8ScaleLayout::Block128) return RunMoeBlockDecode<Dec, true, true>(ctx, args);
    RunMoeBlockDecode<Dec, true, false>(ctx, args);
  });
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(MoeBlockDecodeFp8);

void moe_block_decode_fp8(const ExecutionContext& ctx, const backend::MoeBlockDecodeArgs& args) {
  HWY_DYNAMIC_DISPATCH(MoeBlockDecodeFp8)(ctx, args);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
