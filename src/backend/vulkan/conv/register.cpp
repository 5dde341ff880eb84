// Installs the Vulkan kernels of the gated_delta family: the causal depthwise conv with
// a carried state (shaders/conv_causal1d.comp), which LFM2's short convolution and the
// Gated DeltaNet layer run once per prompt and then once per token. Two commands per
// call: the outputs (one invocation each), then the state update (one per channel),
// ordered by the recorder's barrier. The gates and the delta rule have no Vulkan kernel
// yet.
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

const bool registered = [] {
  backend::GatedDeltaKernels k;
  k.causal_conv1d = &causal_conv1d;
  k.gates = [](const ExecutionContext&, const backend::DeltaGatesProblem&) { missing_kernel("gated_delta_gates"); };
  k.rule = [](const ExecutionContext&, const backend::GatedDeltaRuleProblem&) { missing_kernel("gated_delta_rule"); };
  k.rule_chunked = [](const ExecutionContext&, const backend::GatedDeltaRuleProblem&, int64_t) {
    missing_kernel("gated_delta_rule_chunked");
  };
  backend::gated_delta_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
