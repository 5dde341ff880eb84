// One decode token without allocations: the parts of a one-token forward that the fused
// blocks (kiln/ops/decode_block.h) do not cover, run through the `_out` ops
// (kiln/ops/out_variants.h) and in-place ops on buffers formed when the model loads.
//
// Each step computes exactly what the unfused block computes for one token (the same ops
// in the same order, each rounding where the unfused op rounds), so decode logits stay
// bit-identical with LoadOptions::fused_decode on and off:
//   - DecodeFrame: the embedding row into the residual, the final norm, lm_head and the
//     float32 logits;
//   - AttentionExitStep: attention_decode over the cache, the output gate, o_proj and the
//     residual add (after AttentionEntryDecode);
//   - DenseFfnStep: norm, gate/up, SiLU, product, down and the residual add;
//   - ShortConvStep: LFM2's gated short convolution for one token and the residual add;
//   - DeltaNetStep: the Gated DeltaNet mixer for one token and the residual add (the
//     conv, gates, rule and gated norm fused: delta_net_decode_out).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/ops/gated_delta.h"
#include "kiln/tensor.h"
#include "llm/blocks/attention_block.h"
#include "llm/blocks/delta_net_block.h"
#include "llm/blocks/ffn_blocks.h"
#include "llm/blocks/short_conv_block.h"
#include "llm/kv_cache.h"
#include "llm/weights.h"

namespace kiln::llm {

// The buffers of the decode steps, allocated once. A request names what the buffer is
// for; requests with the same purpose, dtype and shape share one buffer (layers run one
// after another), so the decode working set stays a few rows whatever the depth.
class DecodeBuffers {
 public:
  explicit DecodeBuffers(Device device) : device_(device) {}
  Tensor get(const std::string& purpose, const Shape& shape, DType dtype);

 private:
  Device device_;
  std::map<std::tuple<std::string, DType, Shape>, Tensor> buffers_;
};

// The rms norm of a decoder layer (rms_norm_llama, or rms_norm_one_plus with 1 + w formed
// once) of a float32 row into a float32 row.
struct NormStep {
  Tensor weight;  // w, or 1 + w
  bool one_plus = false;
  double eps = 1e-6;
  static NormStep make(const Tensor& weight, bool one_plus, double eps);
  void operator()(const Tensor& out, const Tensor& x) const;
};

// Linear::operator() for one row into a buffer: the input converted to the dtype the
// weight takes (a buffer of its own when the incoming dtype differs), then linear_out or
// linear_fp8_out.
struct LinearStep {
  const Linear* linear = nullptr;
  Tensor in;   // the converted input [1, K], or undefined when the incoming row is used as is
  Tensor out;  // [1, N]
  static LinearStep make(const Linear& linear, DType incoming, DecodeBuffers& buffers, const std::string& purpose);
  Tensor& operator()(const Tensor& x);
};

struct AttentionExitStep {
  const AttentionBlock* block = nullptr;
  Tensor attn, attn_flat;  // attention_decode's output [1, heads, head_dim] in the cache dtype, and [1, heads*hd]
  Tensor gated, gated_flat, gate_sigmoid;  // output gate: float32
  LinearStep o_proj;
  static AttentionExitStep make(const AttentionBlock& block, DType cache_dtype, DecodeBuffers& buffers);
  // x += o_proj(gate(attention(q over the cache))); q and gate as AttentionEntryDecode returns them.
  void operator()(Tensor& x, const Tensor& q, const Tensor& gate, const KvCache& cache, int64_t layer, int64_t pos);
};

struct DenseFfnStep {
  NormStep norm;
  Tensor h;   // float32 [1, hidden]
  Tensor in;  // h rounded to the dtype gate takes (undefined: h itself), the input of gate and up
  LinearStep gate, up, down;
  // nullopt when gate and up disagree on their output dtype (the unfused block then runs).
  static std::optional<DenseFfnStep> make(const DenseFfn& ffn, NormStep norm, int64_t hidden,
                                          DecodeBuffers& buffers);
  void operator()(Tensor& x);  // x += ffn(norm(x))
};

struct ShortConvStep {
  NormStep norm;
  Tensor h;  // float32 [1, hidden]
  LinearStep in_proj;
  Tensor bcx;                   // float32 [1, 3H] (the in_proj output widened), or in_proj's own buffer
  Tensor b, c, xs;              // its three [1, H] views
  Tensor history;               // float32 [L, H]: the L-1 carried values of u, then u
  std::vector<Tensor> history_rows, taps;  // [1, H] rows of history, [H] rows of the kernel
  Tensor history_head, history_tail;  // history rows 0 .. L-2 (the state) and 1 .. L-1 (the next state)
  Tensor conv, product;         // float32 [1, H]
  LinearStep out_proj;
  static ShortConvStep make(const ShortConvBlock& block, NormStep norm, DecodeBuffers& buffers);
  void operator()(Tensor& x, KvCache& cache, int64_t layer);  // x += conv_block(norm(x))
};

struct DeltaNetStep {
  const DeltaNetBlock* block = nullptr;
  NormStep norm;
  Tensor h, in;  // float32 [1, hidden]; h rounded to the projections' dtype (undefined: h)
  LinearStep qkv_proj, z_proj, b_proj, a_proj;  // Qwen3-Next: qkv_proj and b_proj are the fused qkvz and ba
  Tensor qkvz, ba;                               // Qwen3-Next: the fused outputs in the flat order
  Tensor qkv, z, b, a;                           // the four projections' rows (views)
  Tensor qkv32, z32, b32, a32;                   // the same as float32 (buffers, or the rows themselves)
  Tensor z_heads;                                // z32 as [1, Hv, dv]
  DeltaNetDecodeWeights weights;                 // the fused step's weights (kiln/ops/gated_delta.h)
  Tensor normed, normed_flat;                    // its output [1, Hv, dv] and [1, value_dim]
  LinearStep out_proj;
  static DeltaNetStep make(const DeltaNetBlock& block, NormStep norm, int64_t hidden, DecodeBuffers& buffers);
  void operator()(Tensor& x, KvCache& cache, int64_t layer);  // x += delta_net(norm(x))
};

// The embedding row and the head. Logits go to one of two float32 buffers, whichever the
// caller no longer holds (generate keeps the previous token's logits while it runs the
// next); when the caller holds both, the head allocates a fresh one rather than
// overwrite logits someone still reads.
class DecodeFrame {
 public:
  DecodeFrame(const Tensor& embedding, NormStep final_norm, const Linear& lm_head, DecodeBuffers& buffers);
  // The residual row, float32 [1, hidden], holding the embedding row of `token`.
  Tensor& embed(int64_t token);
  Tensor& residual() { return x_; }
  Tensor& other_residual() { return other_; }  // where fused MoE blocks write x + moe(x)
  // float32 [1, vocab] logits of the residual row.
  Tensor logits(const Tensor& x);

 private:
  struct Slot {
    LinearStep head;  // lm_head into its own out
    Tensor logits;    // float32 [1, vocab]: head.out itself for float32 output
    bool free() const;
  };
  Tensor embedding_;
  Tensor x_, other_, normed_;
  NormStep final_norm_;
  Slot slots_[2];
};

}  // namespace kiln::llm
