// The Gated DeltaNet ops, unfused: the conv as K shifted products of [state; x], the
// gates as exp/softplus/sigmoid, and the delta rule as transformers' torch reference
// writes it (repeat the key heads, normalise, then per token decay, read, correct and
// read again with batched matmuls over the value heads). float32 throughout.
#include <cmath>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"

namespace kiln::composite {

Tensor causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, const std::string& activation) {
  const int64_t tokens = x.size(0), channels = x.size(1), kernel = weight.size(-1);
  KILN_CHECK(conv_state.sizes() == (Shape{kernel - 1, channels}), "composite::causal_conv1d",
             "expected conv_state of shape [{}, {}], got {}", kernel - 1, channels, conv_state.shape_str());
  const Tensor w = weight.reshape({channels, kernel}).to(DType::Float32);
  const Tensor u = cat({conv_state.to(DType::Float32), x.to(DType::Float32)}, 0);  // [K-1+T, C]
  Tensor out = zeros({tokens, channels});
  for (int64_t j = 0; j < kernel; ++j) out = add(out, mul(u.narrow(0, j, tokens), w.select(1, j)));
  if (activation == "silu") out = silu(out);
  conv_state.copy_(u.narrow(0, tokens, kernel - 1));
  return out.to(x.dtype());
}

DeltaGates gated_delta_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias) {
  const Tensor x = add(a.to(DType::Float32), dt_bias.to(DType::Float32));
  return {neg(mul(exp(A_log.to(DType::Float32)), softplus(x))), sigmoid(b.to(DType::Float32))};
}

Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        Tensor& state, bool use_qk_l2norm_in_kernel, std::optional<double> scale) {
  const int64_t tokens = q.size(0), key_heads = q.size(1), key_dim = q.size(2);
  const int64_t value_heads = v.size(1), value_dim = v.size(2);
  // Value head h reads key head h / (Hv / Hk).
  const Tensor head = div(arange(Scalar(value_heads)), Scalar(value_heads / key_heads), "floor");
  Tensor qf = index_select(q.to(DType::Float32), 1, head);
  Tensor kf = index_select(k.to(DType::Float32), 1, head);
  if (use_qk_l2norm_in_kernel) {
    qf = mul(qf, rsqrt(add(sum(mul(qf, qf), {-1}, true), Scalar(1e-6))));
    kf = mul(kf, rsqrt(add(sum(mul(kf, kf), {-1}, true), Scalar(1e-6))));
  }
  qf = mul(qf, Scalar(scale.value_or(1.0 / std::sqrt(static_cast<double>(key_dim)))));
  const Tensor vf = v.to(DType::Float32), decay = exp(g.to(DType::Float32)), bf = beta.to(DType::Float32);
  Tensor S = state.clone();  // [Hv, dk, dv]
  std::vector<Tensor> outputs;
  for (int64_t t = 0; t < tokens; ++t) {
    const Tensor k_t = kf.select(0, t).unsqueeze(2);  // [Hv, dk, 1]
    S = mul(S, decay.select(0, t).view({value_heads, 1, 1}));
    const Tensor mem = bmm(S.transpose(1, 2), k_t).squeeze(2);  // [Hv, dv]
    const Tensor delta = mul(sub(vf.select(0, t), mem), bf.select(0, t).unsqueeze(1));
    S = add(S, bmm(k_t, delta.unsqueeze(1)));
    outputs.push_back(bmm(S.transpose(1, 2), qf.select(0, t).unsqueeze(2)).squeeze(2));
  }
  state.copy_(S);
  return tokens == 0 ? zeros({0, value_heads, value_dim}) : stack(outputs, 0);
}

}  // namespace kiln::composite
