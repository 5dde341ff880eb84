// moe_route under autograd: the routing weights as a function of the router logits.
//
// The kernel chooses the experts (ids are not differentiable, as top-k indices are not
// in PyTorch); the weights are then recomputed from recorded ops (softmax or sigmoid,
// gather of the chosen experts, renormalisation, scaling), so the gradient flows into
// the chosen experts' scores and, through softmax and the renormalisation, into every
// logit of the token. The recomputed weights agree with the kernel's within float32
// rounding. selection_bias only changes which experts are chosen: it gets no gradient.
#include "autograd/function.h"
#include "kiln/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "ops/autograd_hooks_linalg.h"

namespace kiln::autograd {

namespace {

MoeRouting moe_route_entry(const Tensor& logits, int64_t top_k, MoeScoring scoring, bool renormalize,
                           const std::optional<Tensor>& selection_bias, double routed_scaling_factor,
                           double renorm_eps) {
  MoeRouting r = below_autograd([&] {
    return moe_route(logits, top_k, scoring, renormalize, selection_bias, routed_scaling_factor, renorm_eps);
  });
  const Tensor x = logits.to(DType::Float32);
  const Tensor scores = scoring == MoeScoring::Softmax ? softmax(x, 1) : sigmoid(x);
  Tensor w = gather(scores, 1, r.ids.to(DType::Int64));
  if (renormalize) w = div(w, add(sum(w, {1}, true), Scalar(renorm_eps)));
  if (routed_scaling_factor != 1.0) w = mul(w, Scalar(routed_scaling_factor));
  r.weights = w;
  return r;
}

const bool installed = [] {
  autograd_hooks::linalg_hooks().moe_route = moe_route_entry;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
