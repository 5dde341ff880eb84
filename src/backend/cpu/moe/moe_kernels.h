// CPU kernels behind moe_route, moe_permute and moe_experts (internal; the front end is
// src/ops/moe.cpp, the argument structs are in backend/moe.h).
//
// moe_experts is built from the one-row GEMV machinery of gemv-inl.h (the same weight
// decoders, the same x preparation, the same prefetching), arranged so that each
// expert's weights are streamed from memory once per call, whatever the number of
// tokens routed to it:
//   1. every token row is converted to float32 once, in the decoder's lane order;
//   2. gate/up: one parallel region over (expert, 4-row group) pieces; each piece reads
//      the 4 gate rows and the 4 up rows once (they then sit in L1) and produces those
//      4 entries of every routed token's gate and up vectors; then SwiGLU per slot;
//   3. down: one parallel region over 4-row groups of the hidden dim; each piece runs
//      the 4 down rows of every active expert against that expert's tokens and adds
//      the routing-weighted sums per token, so the output rows are owned by one piece
//      and written once, in the output dtype, with no reduction pass.
#pragma once

#include <cstdint>

#include "backend/cpu/linear/linear_kernels.h"
#include "backend/moe.h"
#include "kiln/dtype.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

using backend::ExpertMatrix;
using backend::MoeExpertsArgs;
using backend::MoePermuteArgs;
using backend::MoeRouteArgs;
using backend::SwigluExpert;

void moe_experts(ThreadPool& pool, const MoeExpertsArgs& args);

// Which implementation moe_experts runs. Auto picks per call by the mean number of tokens
// per active expert (moe_kernels.cpp): the GEMV kernel above for decode and small batches,
// the register-tiled kernel of moe_experts_tiled-inl.h for prefill, and from more tokens
// per expert (bf16 and FP8 experts, kiln::bf16_dot_enabled()) the bf16 dot kernel. Tests
// force one path to compare them on the same inputs (Tiled: the bf16 dot kernel where
// enabled, whatever the token count); the setting is process-wide, read once per call.
enum class MoeExpertPath { Auto, Gemv, Tiled };
void force_moe_expert_path(MoeExpertPath path);

// The Highway targets the expert kernels were compiled for (tests pin each one).
int64_t moe_simd_targets();

void moe_route(ThreadPool& pool, const MoeRouteArgs& args);
// One token of moe_route: its E logits to its top_k weights and ids; scores, select and
// order are work space of E values each.
void moe_route_token(const MoeRouteArgs& a, const float* logits, float* scores, float* select, int32_t* order,
                     float* weights, int32_t* ids);
void moe_permute(const MoePermuteArgs& args);

}  // namespace kiln::cpu
