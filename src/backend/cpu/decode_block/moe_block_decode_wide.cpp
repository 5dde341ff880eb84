// The fused MoE decode block for float32, bfloat16 and float16 expert weights (the kernel
// is in moe_block_decode-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/decode_block/moe_block_decode_wide.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/decode_block/moe_block_decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {

void MoeBlockDecodeWide(const ExecutionContext& ctx, const MoeBlockDecodeArgs& args) {
  switch (args.weight_dtype) {
    case DType::Float32: return RunMoeBlockDecode<F32Weights, false, false>(ctx, args);
    case DType::BFloat16: return RunMoeBlockDecode<Bf16Weights, false, false>(ctx, args);
    case DType::Float16: return RunMoeBlockDecode<F16Weights, false, false>(ctx, args);
    default:
      fail(ErrorKind::Type, "moe_block_decode", "unsupported expert weight dtype {}", dtype_name(args.weight_dtype));
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(MoeBlockDecodeWide);

void moe_block_decode_wide(const ExecutionContext& ctx, const backend::MoeBlockDecodeArgs& args) {
  HWY_DYNAMIC_DISPATCH(MoeBlockDecodeWide)(ctx, args);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
