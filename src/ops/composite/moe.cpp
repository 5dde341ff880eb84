// composite::moe_experts: Hugging Face's expert loop -- for each expert, the tokens
// routed to it are gathered, run through the SwiGLU MLP and added back, scaled by
// their routing weights -- in float32 with one rounding at the end.
#include "kiln/error.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduce.h"
#include "ops/composite/composite_util.h"

namespace kiln::composite {
namespace {

constexpr const char* kOp = "composite.moe_experts";

// down(silu(gate x) * up x) for float32 rows x [n, H].
Tensor swiglu(const Tensor& x, const SwigluWeights& w) {
  const Tensor gate = matmul(x, detail::dequantized(w.gate, w.gate_scale, kOp).t());
  const Tensor up = matmul(x, detail::dequantized(w.up, w.up_scale, kOp).t());
  return matmul(mul(silu(gate), up), detail::dequantized(w.down, w.down_scale, kOp).t());
}

}  // namespace

Tensor moe_experts(const Tensor& x, const Tensor& weights, const Tensor& ids, const MoeExperts& experts,
                   const std::optional<SharedExpert>& shared) {
  KILN_CHECK(x.defined() && x.dim() == 2, kOp, "x must be [tokens, hidden]");
  const DType dtype = x.dtype();
  KILN_CHECK_KIND(dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float16, Type, kOp,
                  "x must be float32, bfloat16 or float16, got {}", dtype_name(dtype));
  KILN_CHECK(!experts.experts.empty(), kOp, "no experts given");
  KILN_CHECK(ids.defined() && weights.defined() && ids.dim() == 2 && ids.size(0) == x.size(0) &&
                 weights.sizes() == ids.sizes(),
             kOp, "ids and weights must be [tokens, top_k]");
  const int64_t T = x.size(0), E = static_cast<int64_t>(experts.experts.size());
  const Tensor id = ids.to(DType::Int64);
  if (id.numel() > 0) {
    const int64_t lo = amin(id).item().to_int64(), hi = amax(id).item().to_int64();
    KILN_CHECK_KIND(lo >= 0 && hi < E, Index, kOp, "expert ids must be in [0, {}), got [{}, {}]", E, lo, hi);
  }
  const Tensor xf = x.to(DType::Float32);
  const Tensor w = weights.to(DType::Float32);
  const Tensor token = arange(Scalar(T));
  Tensor out = zeros({T, x.size(1)}, DType::Float32);
  for (int64_t e = 0; e < E; ++e) {
    const Tensor picks = eq(id, Scalar(e));  // [T, k]: which slots chose expert e
    // A token's weight for e (summed should a token list e twice) and who uses it at all.
    const Tensor coef = sum(where(picks, w, Scalar(0.0)), {1});
    const Tensor routed = masked_select(token, amax(picks, {1}));
    if (routed.numel() == 0) continue;
    const Tensor y = swiglu(index_select(xf, 0, routed), experts.experts[static_cast<size_t>(e)]);
    out = index_add(out, 0, routed, mul(y, index_select(coef, 0, routed).unsqueeze(1)));
  }
  if (shared) {
    // Every token, scaled by sigmoid(x . gate_weight).
    const Tensor gate = sigmoid(matmul(xf, shared->gate_weight.to(DType::Float32).reshape({-1, 1})));  // [T, 1]
    out = add(out, mul(swiglu(xf, shared->weights), gate));
  }
  return out.to(dtype);
}

}  // namespace kiln::composite
