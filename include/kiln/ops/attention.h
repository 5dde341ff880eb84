// Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention) and
// kiln's KV-cache decode entry point.
//
// Dtypes: q, k, v share one of float32, float64, bfloat16, float16 (anything else is a
// Type error). float16/bfloat16 compute in float32 and round the output once; float64
// computes in float64. The output is a new contiguous tensor of q's dtype.
//
// Memory: nothing of size L x S is ever allocated. L == 1 without mask or dropout runs a
// fused decode kernel (the context is split across threads; query heads that share a
// K/V head read it once); everything else runs a tiled online-softmax kernel over
// blocks of queries and keys. q, k and v may be arbitrary strided views (e.g. a cache
// stored [N, S, H, E] and passed as .transpose(1, 2)) as long as their last dim is
// contiguous; otherwise that operand is copied once to a contiguous tensor.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// softmax(q k^T * scale + bias) v, with PyTorch's semantics:
//  - q (N..., Hq, L, E), k (N..., H, S, E), v (N..., H, S, Ev) -> (N..., Hq, L, Ev).
//    All dims before the last two broadcast (inputs need at least 2 dims).
//  - attn_mask: bool (true = attend) or float (added to the scores), of dtype bool,
//    float32 or q's dtype, broadcastable to (N..., Hq, L, S).
//  - is_causal: top-left aligned, query i sees keys 0..i (for L == 1 only key 0).
//    is_causal together with attn_mask is an error.
//  - scale: default 1/sqrt(E).
//  - enable_gqa: query head h uses K/V head h / (Hq / Hkv) (repeat_interleave on dim -3);
//    Hq % Hkv != 0 is an error. Without it the head dims broadcast like batch dims.
//  - dropout_p in [0, 1]: dropout on the attention weights (kept weights scaled by
//    1/(1-p)), drawn from kiln's default generator (Philox; the stream depends only on
//    the generator state, not on the thread count). dropout_p == 1 gives zeros.
//  - Rows whose every key is masked (and S == 0) give zeros, not NaN (kiln decision 5).
//  - NaN as in PyTorch's math path: a row with a NaN or +inf score (NaN or +inf in the
//    mask, NaN in q or a visible key, a NaN scale) is NaN. With an infinite scale every
//    score is +-inf or NaN, and is_causal acts as an added -inf bias: a row is zeros if
//    every score, hidden keys included, is -inf, else NaN. With a finite scale the keys
//    is_causal hides are never read.
// Errors: Type for dtypes (q/k/v differ, unsupported dtype, mask dtype), Value for
// dropout_p outside [0, 1], Runtime for shapes (mismatched E or S, batch dims that do
// not broadcast, GQA head counts, mask shape, mask with is_causal).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const std::optional<Tensor>& attn_mask = std::nullopt, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false);

// One decode step against a KV cache: q [B, Hq, E], k_cache [B, Hkv, S_max, E],
// v_cache [B, Hkv, S_max, Ev] -> [B, Hq, Ev], attending to cache positions
// [0, valid_len) with query head h reading K/V head h / (Hq / Hkv). Same dtypes and
// stride rules as scaled_dot_product_attention; the caches may be strided views.
// valid_len must be in [0, S_max] (Index error otherwise); valid_len == 0 gives zeros
// (nothing to attend to, as a fully masked row). Hq % Hkv != 0 is a Runtime error.
Tensor attention_decode(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t valid_len,
                        std::optional<double> scale = std::nullopt);

}  // namespace kiln
