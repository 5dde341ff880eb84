// The token-to-expert bookkeeping of one moe_experts call (internal to the MoE kernels):
// built once on the calling thread, then read by every SIMD phase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/moe/moe_kernels.h"

namespace kiln::cpu {

// Slots are the (token, choice) pairs: slot t * top_k + j for routed choice j of token t,
// then slot tokens * top_k + t for token t's shared expert (expert index num_experts).
struct MoePlan {
  int64_t tokens = 0;
  int64_t top_k = 0;
  int64_t slots = 0;
  int64_t max_inter = 0;
  std::vector<int64_t> slot_begin;      // [num_experts + 2]: slot_list range of each expert
  std::vector<int32_t> slot_list;       // slots grouped by expert, tokens ascending
  std::vector<int32_t> expert_of_slot;  // [slots]
  std::vector<int64_t> active;          // experts with at least one slot, ascending
  std::vector<int64_t> group_begin;     // [active + 1]: first 4-row gate/up group of each
  std::vector<float> shared_weight;     // [tokens] with a shared expert: its gate per token
  // Work space of fill_moe_plan, kept so that a plan refilled call after call (the fused
  // decode block) allocates nothing once its vectors have grown.
  std::vector<int64_t> fill_position;
  std::vector<float> x_row;

  int64_t token_of(int64_t slot) const { return slot < tokens * top_k ? slot / top_k : slot - tokens * top_k; }
  float weight_of(int64_t slot, const MoeExpertsArgs& a) const {
    return slot < tokens * top_k ? a.weights[slot] : shared_weight[slot - tokens * top_k];
  }
};

MoePlan make_moe_plan(const MoeExpertsArgs& args, int64_t rows_per_group);
// Rebuilds `plan` for `args` in place, reusing its vectors' capacity.
void fill_moe_plan(MoePlan& plan, const MoeExpertsArgs& args, int64_t rows_per_group);

// Float scratch from kiln's caching allocator (a prefill-sized buffer would otherwise
// fault in fresh pages on every call).
class MoeScratch {
 public:
  explicit MoeScratch(int64_t floats);
  ~MoeScratch();
  MoeScratch(const MoeScratch&) = delete;
  MoeScratch& operator=(const MoeScratch&) = delete;
  float* data() const { return data_; }

 private:
  float* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kiln::cpu

namespace kiln::cpu {
// The per-weight-dtype kernels (moe_experts_wide.cpp, moe_experts_fp8.cpp).
void moe_experts_wide(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan);
void moe_experts_fp8(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan);
// The many-token (prefill) kernels, register tiles of a GEMM (moe_experts_tiled-inl.h).
void moe_experts_tiled_wide(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan);
void moe_experts_tiled_fp8(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan);
// The many-token kernel for bfloat16 and float8_e4m3fn experts with AVX512-BF16
// (moe_experts_bf16_dot.cpp): only when kiln::bf16_dot_enabled().
void moe_experts_bf16_dot(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan);
}  // namespace kiln::cpu
