// Installs the Vulkan kernels of the gated_delta family: the causal depthwise conv with
// a carried state (shaders/conv_causal1d.comp), which LFM2's short convolution and the
// Gated DeltaNet layer run once per prompt and then once per token (two commands per
// call: the outputs, one invocation each, then the state update, one per channel,
// ordered by the recorder's barrier), and the Gated DeltaNet gates
// (shaders/delta_gates.comp), and the gated delta rule in its recurrent form
// (shaders/gated_delta_rule.comp), which also serves the chunked entry: a prompt is one
// dispatch that walks its tokens in order with the state in registers (the chunked WY
// form has no Vulkan kernel yet; both forms agree to float32 rounding).
#include "backend/gated_delta.h"
#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::vulkan {
namespace {

void causal_conv1d(const ExecutionContext&, const backend::CausalConv1dProblem& p) {
  const char* op = "causal_conv1d";
  const int64_t elements = checked_mul(p.tokens, p.channels, op);
  if (elements == 0) return;
  const int64_t history = p.kernel - 1;
  const Binding out = bind_raw(p.out, DType::Float32, elements, op);
  const Binding x = bind_raw(p.x, DType::Float32, elements, op);
  const Binding w = bind_raw(p.weight, DType::Float32, checked_mul(p.channels, p.kernel, op), op);
  // A kernel of one tap has no history: the shader never touches the state binding.
  const Binding state = history > 0 ? bind_raw(p.state, DType::Float32, checked_mul(history, p.channels, op), op) : x;
  struct {
    uint32_t tokens, channels, kernel, out_first, x_first, w_first, state_first;
  } push{static_cast<uint32_t>(p.tokens), static_cast<uint32_t>(p.channels), static_cast<uint32_t>(p.kernel),
         out.first, x.first, w.first, state.first};
  const uint32_t silu = p.silu ? 1u : 0u;
  const uint32_t outputs_spec[] = {0u, silu};
  const auto outputs_grid = grid_for(elements, 256, op);
  dispatch(op, "conv_causal1d", outputs_spec, {out, x, w, state}, &push, sizeof(push), outputs_grid[0],
           outputs_grid[1]);
  if (history == 0) return;
  const uint32_t state_spec[] = {1u, silu};
  const auto state_grid = grid_for(p.channels, 256, op);
  dispatch(op, "conv_causal1d", state_spec, {out, x, w, state}, &push, sizeof(push), state_grid[0], state_grid[1]);
}

void delta_gates(const ExecutionContext&, const backend::DeltaGatesProblem& p) {
  const char* op = "gated_delta_gates";
  const int64_t elements = checked_mul(p.tokens, p.heads, op);
  if (elements == 0) return;
  const Binding g = bind_raw(p.g, DType::Float32, elements, op);
  const Binding beta = bind_raw(p.beta, DType::Float32, elements, op);
  const Binding a = bind_raw(p.a, DType::Float32, elements, op);
  const Binding b = bind_raw(p.b, DType::Float32, elements, op);
  const Binding a_log = bind_raw(p.a_log, DType::Float32, p.heads, op);
  const Binding dt_bias = bind_raw(p.dt_bias, DType::Float32, p.heads, op);
  struct {
    uint32_t n, heads, g_first, beta_first, a_first, b_first, a_log_first, dt_bias_first;
  } push{static_cast<uint32_t>(elements), static_cast<uint32_t>(p.heads), g.first, beta.first, a.first, b.first,
         a_log.first, dt_bias.first};
  const auto grid = grid_for(elements, 256, op);
  dispatch(op, "delta_gates", {}, {g, beta, a, b, a_log, dt_bias}, &push, sizeof(push), grid[0], grid[1]);
}

// Each invocation keeps a state column of key_dim floats in registers and the group
// keeps the token's q and k rows in shared memory: 8 KiB at this bound, within the
// 16 KiB every Vulkan device offers.
constexpr int64_t kMaxKeyDim = 1024;

void gated_delta_rule(const backend::GatedDeltaRuleProblem& p, const char* op) {
  KILN_CHECK_KIND(p.key_dim <= kMaxKeyDim, NotImplemented, op,
                  "the Vulkan kernel takes key_dim up to {}, got {}", kMaxKeyDim, p.key_dim);
  KILN_CHECK(p.key_heads > 0 && p.value_heads % p.key_heads == 0, op,
             "value heads ({}) must be a multiple of key heads ({})", p.value_heads, p.key_heads);
  if (p.tokens == 0) return;
  constexpr uint32_t kColumns = 32;  // shaders/gated_delta_rule.comp's work-group width
  const int64_t qk_elements = checked_mul(checked_mul(p.tokens, p.key_heads, op), p.key_dim, op);
  const int64_t gate_elements = checked_mul(p.tokens, p.value_heads, op);
  const int64_t v_elements = checked_mul(gate_elements, p.value_dim, op);
  const int64_t state_elements = checked_mul(checked_mul(p.value_heads, p.key_dim, op), p.value_dim, op);
  const Binding state = bind_raw(p.state, DType::Float32, state_elements, op);
  const Binding out = bind_raw(p.out, DType::Float32, v_elements, op);
  const Binding q = bind_raw(p.q, DType::Float32, qk_elements, op);
  const Binding k = bind_raw(p.k, DType::Float32, qk_elements, op);
  const Binding v = bind_raw(p.v, DType::Float32, v_elements, op);
  const Binding g = bind_raw(p.g, DType::Float32, gate_elements, op);
  const Binding beta = bind_raw(p.beta, DType::Float32, gate_elements, op);
  const int64_t column_blocks = ceil_div(p.value_dim, int64_t{kColumns});
  struct {
    uint32_t tokens, key_heads, value_heads, value_dim, column_blocks;
    float scale;
    uint32_t state_first, out_first, q_first, k_first, v_first, g_first, beta_first;
  } push{static_cast<uint32_t>(p.tokens),
         static_cast<uint32_t>(p.key_heads),
         static_cast<uint32_t>(p.value_heads),
         static_cast<uint32_t>(p.value_dim),
         static_cast<uint32_t>(column_blocks),
         p.scale,
         state.first,
         out.first,
         q.first,
         k.first,
         v.first,
         g.first,
         beta.first};
  const uint32_t spec[] = {static_cast<uint32_t>(p.key_dim), p.l2norm_qk ? 1u : 0u};
  const auto grid = grid_for(checked_mul(p.value_heads, column_blocks, op), 1, op);
  dispatch(op, "gated_delta_rule", spec, {state, out, q, k, v, g, beta}, &push, sizeof(push), grid[0], grid[1]);
}

const bool registered = [] {
  backend::GatedDeltaKernels k;
  k.causal_conv1d = &causal_conv1d;
  k.gates = &delta_gates;
  k.rule = [](const ExecutionContext&, const backend::GatedDeltaRuleProblem& p) {
    gated_delta_rule(p, "gated_delta_rule");
  };
  k.rule_chunked = [](const ExecutionContext&, const backend::GatedDeltaRuleProblem& p, int64_t) {
    gated_delta_rule(p, "gated_delta_rule_chunked");
  };
  backend::gated_delta_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
