// Installs the CPU kernels of the decode_block family.
#include "backend/cpu/decode_block/decode_block_kernels.h"
#include "backend/decode_block.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::DecodeBlockKernels k;
  k.moe_block = [](const ExecutionContext& ctx, const backend::MoeBlockDecodeArgs& a) {
    if (a.weight_dtype == DType::Float8_e4m3fn) {
      moe_block_decode_fp8(ctx, a);
    } else {
      moe_block_decode_wide(ctx, a);
    }
  };
  k.attention_entry = [](const ExecutionContext& ctx, const backend::AttentionEntryDecodeArgs& a) {
    if (a.q.dtype == DType::Float8_e4m3fn) {
      attention_entry_decode_fp8(ctx, a);
    } else {
      attention_entry_decode_wide(ctx, a);
    }
  };
  backend::decode_block_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
