// CPU kernels of the decode_block family (internal; the front end is
// src/ops/decode_block.cpp, the argument structs are in backend/decode_block.h).
#pragma once

#include "backend/decode_block.h"
#include "kiln/context.h"

namespace kiln::cpu {

// The fused MoE decode block by expert weight dtype (moe_block_decode_<weights>.cpp).
void moe_block_decode_wide(const ExecutionContext& ctx, const backend::MoeBlockDecodeArgs& args);
void moe_block_decode_fp8(const ExecutionContext& ctx, const backend::MoeBlockDecodeArgs& args);
// The fused attention-block entry by projection dtype (attention_entry_decode_<weights>.cpp).
void attention_entry_decode_wide(const ExecutionContext& ctx, const backend::AttentionEntryDecodeArgs& args);
void attention_entry_decode_fp8(const ExecutionContext& ctx, const backend::AttentionEntryDecodeArgs& args);

}  // namespace kiln::cpu
