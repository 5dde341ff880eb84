// Mixture-of-Experts routing and the fused expert block (kiln's own ops; the numerics
// follow Hugging Face transformers, spec/models.md §0.7, §1.2, §2.5, §3.2).
//
// moe_route(router_logits [T, E], top_k, scoring, renormalize, selection_bias,
//           routed_scaling_factor, renorm_eps) -> {weights float32 [T, k], ids int32 [T, k]}
//   scores = softmax(logits) (Qwen) or sigmoid(logits) (LFM2), in float32;
//   experts chosen by top-k of scores + selection_bias (LFM2's expert_bias: it changes
//   the choice, not the weights) or of scores alone; ties go to the lower expert id;
//   each token's k ids are in descending order of the selection value.
//   weights = scores at those ids; renormalize: w / (sum w + renorm_eps) (Qwen: eps 0,
//   LFM2: 1e-6); then w * routed_scaling_factor.
//   router_logits float32/bfloat16/float16; selection_bias float [E].
//
// moe_permute(ids [T, k], num_experts) -> token order for grouped_mm:
//   slots t*k+j sorted by expert (stable), token_index[s] = t of sorted slot s,
//   slot[s] = t*k + j, offs int32 [E] cumulative ends (grouped_mm's offs).
//
// moe_experts(x [T, H], weights [T, k], ids [T, k], experts, shared) -> [T, H], x's dtype:
//   y[t] = sum_j weights[t, j] * down_e(silu(gate_e(x_t)) * up_e(x_t)), e = ids[t, j]
//          (+ sigmoid(x_t . shared.gate_weight) * shared(x_t) with a shared expert)
//   Gate and up rows are read in one pass, the SwiGLU is applied in registers, every
//   expert's weights are streamed once per call whatever the number of tokens routed to
//   it, and all (expert, row block) pieces of the call share one parallel region per
//   projection: no per-expert host loop, no intermediate [T, k, 2I] round trip through
//   memory beyond the [T*k, I] activations. Accumulation in float32; each token's sum
//   over its experts is rounded to x's dtype once (transformers adds the k expert
//   outputs in the activation dtype, so bfloat16 results can differ by an ulp or two).
//   Expert weights: float32, bfloat16, float16 (with x of any of those dtypes) or
//   float8_e4m3fn with float32 scales per output row ([rows]) or per 128x128 block
//   ([ceil(rows/128), ceil(cols/128)], Hugging Face `weight_scale_inv`).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

enum class MoeScoring { Softmax, Sigmoid };

struct MoeRouting {
  Tensor weights;  // float32 [T, k]
  Tensor ids;      // int32 [T, k]
};

MoeRouting moe_route(const Tensor& router_logits, int64_t top_k, MoeScoring scoring, bool renormalize,
                     const std::optional<Tensor>& selection_bias = std::nullopt, double routed_scaling_factor = 1.0,
                     double renorm_eps = 0.0);

struct MoePermutation {
  Tensor token_index;  // int64 [T*k]
  Tensor slot;         // int64 [T*k]
  Tensor offs;         // int32 [E]
};

MoePermutation moe_permute(const Tensor& ids, int64_t num_experts);

// One SwiGLU expert: gate [I, H], up [I, H], down [H, I] with unit stride inside rows
// (views into a fused [E, 2I, H] tensor or separate checkpoint tensors; never copied).
// float8_e4m3fn weights carry float32 scales (per row or 128x128 blocks).
struct SwigluWeights {
  Tensor gate, up, down;
  std::optional<Tensor> gate_scale, up_scale, down_scale;
};

struct MoeExperts {
  std::vector<SwigluWeights> experts;  // all of one dtype and shape
  // Views of Hugging Face's fused layout (transformers v5, Qwen3.5 on disk):
  // gate_up [E, 2I, H] (gate rows first) and down [E, H, I]; FP8 scales alike
  // ([E, 2I] / [E, H] per row, or [E, ceil(2I/128), ceil(H/128)] / [E, ceil(H/128),
  // ceil(I/128)] blocks, the gate/up split falling on a block boundary).
  static MoeExperts from_fused(const Tensor& gate_up, const Tensor& down,
                               const std::optional<Tensor>& gate_up_scale = std::nullopt,
                               const std::optional<Tensor>& down_scale = std::nullopt);
};

// Qwen3.5 / Qwen3-Next shared expert: applied to every token, scaled by
// sigmoid(x . gate_weight) with gate_weight [1, H] (any float dtype).
struct SharedExpert {
  SwigluWeights weights;
  Tensor gate_weight;
};

Tensor moe_experts(const Tensor& x, const Tensor& weights, const Tensor& ids, const MoeExperts& experts,
                   const std::optional<SharedExpert>& shared = std::nullopt);

}  // namespace kiln
