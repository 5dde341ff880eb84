// The moe family of the kernel table: routing, the token permutation and the fused
// SwiGLU expert block (front end: src/ops/moe.cpp).
#pragma once

#include <cstdint>

#include "backend/linear.h"  // Fp8ScaleLayout
#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

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

// Validated by the front end: ids in range, dtypes supported, hidden > 0, tokens > 0.
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
  // Optional shared expert applied to every token t with weight sigmoid(x[t] . shared_gate),
  // the dot product in float64 over float32 values; shared_gate is float32 [hidden].
  const SwigluExpert* shared = nullptr;
  const float* shared_gate = nullptr;
  // x [tokens, hidden] and out [tokens, hidden], contiguous, float32/bfloat16/float16.
  DType act_dtype = DType::Float32;
  const void* x = nullptr;
  void* out = nullptr;
};

// Routing of T tokens over E experts (scores in float32): ids/weights [T, k].
struct MoeRouteArgs {
  const float* logits = nullptr;  // [T, E] float32
  int64_t tokens = 0;
  int64_t experts = 0;
  int64_t top_k = 0;
  bool sigmoid = false;                   // false: softmax over the E logits
  const float* selection_bias = nullptr;  // [E] or nullptr
  bool renormalize = false;
  double renorm_eps = 0.0;
  double scaling = 1.0;
  float* weights = nullptr;  // [T, k]
  int32_t* ids = nullptr;    // [T, k]
};

// The (token, choice) slots of ids [slots / top_k, top_k] sorted by expert, stably:
// token_index[i] and slot[i] for i < slots, offs[e] = the exclusive end of expert e's run.
// An id outside [0, num_experts) is an Index error (raised before anything is written).
struct MoePermuteArgs {
  const int64_t* ids = nullptr;
  int64_t slots = 0;
  int64_t top_k = 1;
  int64_t num_experts = 1;
  int64_t* token_index = nullptr;
  int64_t* slot = nullptr;
  int32_t* offs = nullptr;
};

struct MoeKernels {
  void (*route)(const ExecutionContext& ctx, const MoeRouteArgs& args) = nullptr;
  void (*permute)(const ExecutionContext& ctx, const MoePermuteArgs& args) = nullptr;
  void (*experts)(const ExecutionContext& ctx, const MoeExpertsArgs& args) = nullptr;
};

inline KernelTable<MoeKernels> moe_kernels{"moe"};

}  // namespace kiln::backend
