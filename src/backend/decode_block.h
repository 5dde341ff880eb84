// The decode_block family of the kernel table: whole decoder blocks for one token, each
// in one parallel region (front end: src/ops/decode_block.cpp).
//
// moe_block: out = x + moe(rms_norm(x)) for one float32 residual row, i.e. the norm, the
// router projection, top-k routing, the routed SwiGLU experts, the shared expert and the
// residual add, with the arithmetic of the unfused ops (rms_norm / rms_norm_one_plus,
// linear, moe_route, moe_experts, add_) so that its result is bit-identical to them.
#pragma once

#include <cstdint>

#include "backend/linear.h"  // LinearWeight, Fp8ScaleLayout
#include "backend/moe.h"     // SwigluExpert
#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// Validated by the front end: x and out are distinct float32 rows of `hidden` values;
// the router is float32, bfloat16 or float16 [experts, hidden] (its logits are rounded to
// its dtype, as the linear op's output is); experts as in MoeExpertsArgs.
struct MoeBlockDecodeArgs {
  const float* x = nullptr;
  float* out = nullptr;
  int64_t hidden = 0;
  // rms_norm(x) * norm_weight (for a zero-centred norm the weight already holds 1 + w),
  // eps already rounded to float32 as the norm op rounds it.
  const float* norm_weight = nullptr;
  double norm_eps = 1e-6;
  LinearWeight router;  // N = num_experts, K = hidden
  // Routing, as MoeRouteArgs.
  int64_t top_k = 1;
  bool sigmoid = false;
  const float* selection_bias = nullptr;
  bool renormalize = false;
  double renorm_eps = 0.0;
  double scaling = 1.0;
  // Experts, as MoeExpertsArgs.
  DType weight_dtype = DType::BFloat16;
  Fp8ScaleLayout scale_layout = Fp8ScaleLayout::PerRow;
  const SwigluExpert* experts = nullptr;
  int64_t num_experts = 0;
  const SwigluExpert* shared = nullptr;
  const float* shared_gate = nullptr;
};

// The attention block's entry for one token: h = rms_norm(x) * norm_weight; q, k, v =
// the three projections of h (rounded to the projections' input dtype first, outputs in
// `proj_out`: the weight's dtype, float32 for FP8); per head the q/k norm, RoPE at
// `position`, then q (and the gate half of gated q heads) out and k, v into the cache,
// each rounded as the unfused ops round them (rms_norm_llama / rms_norm_one_plus,
// apply_rotary_emb_cos_sin, KvCache::write's copy_, .to(cache dtype)).
struct AttentionEntryDecodeArgs {
  const float* x = nullptr;
  int64_t hidden = 0;
  const float* norm_weight = nullptr;  // 1 + w for a zero-centred norm
  double norm_eps = 1e-6;               // rounded to float32 already
  // q: N = heads * head_dim, or heads * 2 * head_dim with the output gate ([query | gate]
  // per head); k, v: N = kv_heads * head_dim; K = hidden; one dtype and scale layout.
  LinearWeight q, k, v;
  DType proj_in = DType::Float32;   // the activations' dtype the projections take
  DType proj_out = DType::Float32;  // and their output dtype
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  bool output_gate = false;
  // float32 [head_dim]; one_plus: already 1 + w and applied to the float32 head
  // (rms_norm_one_plus of .to(float32)); else rms_norm_llama of the proj_out head.
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  bool head_norm_one_plus = false;
  double head_norm_eps = 1e-6;  // rounded to float32 already
  int64_t rotary_dim = 0;
  const float* inv_freq = nullptr;  // [rotary_dim / 2]
  int64_t position = 0;
  // Outputs: q [heads, head_dim] in cache_dtype; gate float32 [heads, head_dim] (output
  // gate only); k and v at `position` of the caches [kv_heads, capacity, head_dim].
  DType cache_dtype = DType::BFloat16;
  void* q_out = nullptr;
  float* gate_out = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int64_t cache_capacity = 0;
};

struct DecodeBlockKernels {
  void (*moe_block)(const ExecutionContext& ctx, const MoeBlockDecodeArgs& args) = nullptr;
  void (*attention_entry)(const ExecutionContext& ctx, const AttentionEntryDecodeArgs& args) = nullptr;
};

inline KernelTable<DecodeBlockKernels> decode_block_kernels{"decode_block"};

}  // namespace kiln::backend
