#include "llm/blocks/ffn_blocks.h"

#include "kiln/ops/elementwise.h"

namespace kiln::llm {
namespace {

int64_t bytes_of(const std::optional<Tensor>& t) { return t ? static_cast<int64_t>(t->nbytes()) : 0; }

}  // namespace

// In the projections' dtype, as transformers computes act(gate(x)) * up(x).
Tensor DenseFfn::forward(const Tensor& h) const {
  const Tensor x = h.to(gate.input_dtype());
  return down(mul(silu(gate(x)), up(x)));
}

int64_t DenseFfn::decode_bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }

Tensor MoeBlock::forward(const Tensor& h) const {
  // Router logits in the router's dtype (transformers: the activation dtype); moe_route
  // takes them to float32 for the scores.
  MoeRouting routing =
      moe_route(router(h), top_k, scoring, renormalize, selection_bias, routed_scaling_factor, renorm_eps);
  // float32 activations with experts of any stored dtype: moe_experts widens the
  // weights itself, and its result has the activations' dtype.
  return moe_experts(h, routing.weights, routing.ids, experts, shared);
}

int64_t MoeBlock::decode_bytes() const {
  const auto swiglu_bytes = [](const SwigluWeights& e) {
    return static_cast<int64_t>(e.gate.nbytes() + e.up.nbytes() + e.down.nbytes()) + bytes_of(e.gate_scale) +
           bytes_of(e.up_scale) + bytes_of(e.down_scale);
  };
  const int64_t expert = experts.experts.empty() ? 0 : swiglu_bytes(experts.experts.front());
  const int64_t shared_bytes =
      shared ? swiglu_bytes(shared->weights) + static_cast<int64_t>(shared->gate_weight.nbytes()) : 0;
  return router.bytes() + top_k * expert + bytes_of(selection_bias) + shared_bytes;
}

}  // namespace kiln::llm
