// LFM2's gated short convolution (spec: models.md §3.2, `Lfm2MoeShortConv`):
//
//   B, C, x = split(in_proj(h), 3)          in that order, each [T, H]
//   u       = B * x
//   c[t]    = sum_{j<L} w[j] * u[t - (L-1) + j]   causal depthwise conv, kernel L,
//                                                 no bias, no activation
//   return    out_proj(C * c)
//
// u before the block's first token comes from the sequence state (the previous
// block's last L-1 values of u; zeros at the start), so a prefill split into pieces and
// token-by-token decode compute the same thing. A prompt (T > 1) runs the conv as one
// causal_conv1d call over all its tokens, which leaves the carried state at the end;
// a decode token keeps the per-tap elementwise ops.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"
#include "llm/kv_cache.h"
#include "llm/weights.h"

namespace kiln::llm {

struct ShortConvBlock {
  Linear in_proj;   // [3H, H]
  Linear out_proj;  // [H, H]
  // float32 [L, H]: kernel[j] weighs u[t - (L-1) + j] (conv.weight [H, 1, L] transposed)
  Tensor kernel;
  int64_t hidden = 0;

  // h: float32 [T, H]; updates the layer's conv state. Returns [T, H] in out_proj's
  // output dtype.
  Tensor forward(const Tensor& h, KvCache& cache, int64_t layer) const;
  int64_t decode_bytes() const;
};

}  // namespace kiln::llm
