// The feed-forward halves of a decoder layer (spec: models.md §0.4, §0.7, §1.2 step 7,
// §3.2 FFN).
//
// DenseFfn: down(silu(gate(h)) * up(h)).
// MoeBlock: logits = h W_router^T; moe_route picks top_k experts and their weights
//   (Qwen3-MoE: softmax, renormalised when norm_topk_prob, eps 0; LFM2-MoE: sigmoid,
//   choice by score + expert_bias, weights from the unbiased scores, renormalised with
//   eps 1e-6, times routed_scaling_factor); moe_experts sums the chosen SwiGLU experts,
//   plus, in Qwen3-Next / Qwen3.5 (§2.5), sigmoid(h . w_gate) times a shared SwiGLU
//   expert applied to every token.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/ops/moe.h"
#include "kiln/tensor.h"
#include "llm/weights.h"

namespace kiln::llm {

struct DenseFfn {
  Linear gate, up, down;

  Tensor forward(const Tensor& h) const;  // float32 [T, H] -> [T, H] in down's output dtype
  int64_t decode_bytes() const;
};

struct MoeBlock {
  Linear router;  // [E, H]
  MoeExperts experts;
  int64_t top_k = 0;
  MoeScoring scoring = MoeScoring::Softmax;
  bool renormalize = false;
  std::optional<Tensor> selection_bias;  // float32 [E] (LFM2 expert_bias)
  double routed_scaling_factor = 1.0;
  double renorm_eps = 0.0;
  std::optional<SharedExpert> shared;

  Tensor forward(const Tensor& h) const;  // float32 [T, H] -> float32 [T, H]
  // The router and top_k experts' weights (every expert has the same size).
  int64_t decode_bytes() const;
};

}  // namespace kiln::llm
