// Fused decode blocks: one token through a whole block of a decoder layer in one
// parallel region, with everything that does not change from token to token checked
// and laid out once (kiln's own ops; the unfused definition is the chain of public ops
// each block names, which its result matches bit for bit).
//
// MoeBlockDecode: out = x + moe(norm(x)) for one float32 residual row, i.e.
//   h      = rms_norm(x) * w            (norm_one_plus: * (1 + w), Qwen3-Next / Qwen3.5)
//   logits = linear(h.to(router dtype), router)          rounded to the router's dtype
//   ids, weights = moe_route(logits, top_k, scoring, renormalize, selection_bias,
//                            routed_scaling_factor, renorm_eps)
//   out    = x + moe_experts(h, weights, ids, experts, shared)
// (rms_norm_llama of a float32 row and torch's rms_norm compute the same thing).
// Decode runs this once per MoE layer and token: the norm, the router, top-k, the
// experts, the shared expert and the residual add share one parallel region, and a call
// allocates nothing once the calling threads' scratch has grown to the model's sizes.
//
// AttentionEntryDecode: the attention block up to the attention itself, for one token:
//   h       = rms_norm(x) * w (or * (1 + w)), rounded to the projections' input dtype
//             (the weight's dtype; float32 for FP8 weights, which take linear_fp8)
//   q, k, v = the three projections of h, viewed [heads, head_dim] (with output_gate,
//             q_proj's rows are [query | gate] per head)
//   q, k    = per head rms_norm_llama(t, q_norm / k_norm), or with head_norm_one_plus
//             rms_norm_one_plus(t.to(float32), ...); then RoPE at `position`
//             (apply_rotary_emb_cos_sin with rope_cos_sin's tables, the first rotary_dim
//             dims of each head)
//   k_cache[0, :, position], v_cache[0, :, position] = k, v (rounded to the cache dtype)
//   returns q.to(cache dtype) and gate.to(float32).
// The norm, the three projections, the head norms, RoPE and the cache write share one
// parallel region; the RoPE angles come from inverse frequencies formed once.
// Neither block is differentiable: tensors that require grad are refused (use the
// unfused ops).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "kiln/ops/moe.h"
#include "kiln/tensor.h"

namespace kiln {

struct MoeBlockDecodeConfig {
  Tensor norm_weight;  // [hidden], any float dtype (used as float32)
  bool norm_one_plus = false;
  double norm_eps = 1e-6;
  Tensor router;  // [experts, hidden]: float32, bfloat16 or float16
  int64_t top_k = 1;
  MoeScoring scoring = MoeScoring::Softmax;
  bool renormalize = false;
  std::optional<Tensor> selection_bias;  // [experts]
  double routed_scaling_factor = 1.0;
  double renorm_eps = 0.0;
  MoeExperts experts;
  std::optional<SharedExpert> shared;
};

class MoeBlockDecode {
 public:
  // Checks the block once (bad input raises, naming "moe_block_decode"). Returns nullopt
  // when no fused kernel covers it, and callers then run the unfused ops: on a device
  // without decode_block kernels (at once, leaving the checks to those ops), or for a
  // router that is not float32/bfloat16/float16.
  static std::optional<MoeBlockDecode> prepare(const MoeBlockDecodeConfig& config);

  // out = x + moe(norm(x)) for x and out float32 [1, hidden] (or [hidden]), contiguous,
  // on the block's device, not overlapping.
  void operator()(const Tensor& x, const Tensor& out) const;

  int64_t hidden() const;

 private:
  struct State;
  explicit MoeBlockDecode(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

struct AttentionEntryDecodeConfig {
  Tensor norm_weight;  // [hidden]
  bool norm_one_plus = false;
  double norm_eps = 1e-6;
  Tensor q_weight, k_weight, v_weight;  // [N, hidden]: one dtype (float32, bfloat16, float16, float8_e4m3fn)
  std::optional<Tensor> q_scale, k_scale, v_scale;  // FP8: float32 per row [N] or 128x128 blocks
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool output_gate = false;
  Tensor q_norm, k_norm;  // [head_dim]
  bool head_norm_one_plus = false;
  double head_norm_eps = 1e-6;
  int64_t rotary_dim = 0;  // 0: the whole head
  double rope_theta = 10000.0;
  DType cache_dtype = DType::BFloat16;  // the K/V cache's dtype (float32 or bfloat16)
};

class AttentionEntryDecode {
 public:
  // Checks the block once (bad input raises, naming "attention_entry_decode"). nullopt when
  // no fused kernel covers it: on a device without decode_block kernels (at once, leaving
  // the checks to the unfused ops), or for a head_dim that is not a multiple of 8 (the
  // fused kernel's head pieces must fall on the linear kernel's 8-row passes).
  static std::optional<AttentionEntryDecode> prepare(const AttentionEntryDecodeConfig& config);

  // The block's two outputs: buffers it owns, overwritten by its next call.
  struct Output {
    Tensor q;     // [1, heads, head_dim] in the cache dtype
    Tensor gate;  // float32 [1, heads, head_dim] with output_gate, else undefined
  };
  // x: float32 [1, hidden] (or [hidden]), contiguous. k_cache, v_cache: [1, kv_heads,
  // capacity, head_dim] contiguous in the cache dtype; position in [0, capacity).
  Output operator()(const Tensor& x, const Tensor& k_cache, const Tensor& v_cache, int64_t position) const;

 private:
  struct State;
  explicit AttentionEntryDecode(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

}  // namespace kiln
