// CPU kernels behind moe_route and moe_experts (internal; the front end is
// src/ops/moe.cpp).
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
#include "kiln/dtype.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

// One projection of one expert: `rows` rows of `cols` elements, row r at
// data + r * row_stride elements (unit stride inside a row); float8_e4m3fn carries
// float32 scales in the call's layout (per row: scale[r]; Block128: row-major
// [ceil(rows/128), ceil(cols/128)]).
struct ExpertMatrix {
  const void* data = nullptr;
  int64_t row_stride = 0;
  const float* scale = nullptr;
};

// down(silu(gate x) * up x) with gate/up [inter, hidden] and down [hidden, inter].
struct SwigluExpert {
  ExpertMatrix gate, up, down;
  int64_t inter = 0;
};

struct MoeExpertsArgs {
  DType weight_dtype = DType::BFloat16;  // float32, bfloat16, float16 or float8_e4m3fn
  Fp8ScaleLayout scale_layout = Fp8ScaleLayout::PerRow;
  int64_t hidden = 0;
  const SwigluExpert* experts = nullptr;  // num_experts entries
  int64_t num_experts = 0;
  // Routing: ids [tokens, top_k] in [0, num_experts), float32 weights [tokens, top_k].
  int64_t tokens = 0;
  int64_t top_k = 0;
  const int32_t* ids = nullptr;
  const float* weights = nullptr;
  // Optional shared expert applied to every token with weight shared_weight[t].
  const SwigluExpert* shared = nullptr;
  const float* shared_weight = nullptr;
  // x [tokens, hidden] and out [tokens, hidden], contiguous, float32/bfloat16/float16.
  DType act_dtype = DType::Float32;
  const void* x = nullptr;
  void* out = nullptr;
};

// Validated by the front end: ids in range, dtypes supported, hidden > 0, tokens > 0.
void moe_experts(ThreadPool& pool, const MoeExpertsArgs& args);

// The Highway targets the expert kernels were compiled for (tests pin each one).
int64_t moe_simd_targets();

// Routing of T tokens over E experts (scores in float32): ids/weights [T, k].
struct MoeRouteArgs {
  const float* logits = nullptr;  // [T, E] float32
  int64_t tokens = 0;
  int64_t experts = 0;
  int64_t top_k = 0;
  bool sigmoid = false;            // false: softmax over the E logits
  const float* selection_bias = nullptr;  // [E] or nullptr
  bool renormalize = false;
  double renorm_eps = 0.0;
  double scaling = 1.0;
  float* weights = nullptr;  // [T, k]
  int32_t* ids = nullptr;    // [T, k]
};
void moe_route(ThreadPool& pool, const MoeRouteArgs& args);

}  // namespace kiln::cpu
