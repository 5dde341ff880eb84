// Backward formulas of the products, softmax and the fused NN ops.
//
// The fused ops without a formula of their own (the norms, silu_and_mul, attention,
// linear_fp8, moe_experts) are differentiated through their composites
// (kiln/ops/composite.h): while recording, the op runs as its composite, whose simpler
// ops record themselves. The values agree with the fused kernel within rounding.
#include "autograd/formula_util.h"
#include "autograd/function.h"
#include "kiln/error.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pad.h"
#include "kiln/ops/reduce.h"
#include "ops/autograd_hooks.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;
using C = BackwardContext;

// ---------------------------------------------------------------- products

// The gradients of matmul(a, b) under torch.matmul's rules, for every product op (mm,
// bmm, mv and dot are special cases): 1-D operands become matrices, batch dims
// broadcast, and each gradient is summed back to its operand.
Grads matmul_grads(const Tensor& g_out, const Tensor& a, const Tensor& b, const std::vector<bool>& needs) {
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Tensor g = g_out;
  if (a.dim() == 1) g = g.unsqueeze(g.dim() == 0 ? 0 : (b.dim() == 1 ? 0 : g.dim() - 1));
  if (b.dim() == 1) g = g.unsqueeze(-1);
  Tensor ga, gb;
  if (needs[0]) ga = sum_to(matmul(g, conj(b2).transpose(-1, -2)), a2.sizes()).reshape(a.sizes());
  if (needs[1]) gb = sum_to(matmul(conj(a2).transpose(-1, -2), g), b2.sizes()).reshape(b.sizes());
  return {ga, gb};
}

template <Tensor (*Op)(const Tensor&, const Tensor&)>
Tensor product_entry(const char* name, const Tensor& a, const Tensor& b) {
  Tensor y = below_autograd([&] { return Op(a, b); });
  return record(name, {a, b}, y, {Save::input(a), Save::input(b)},
                [](C& c) { return matmul_grads(c.grad(), c.saved[0], c.saved[1], c.needs); });
}

Tensor linear_entry(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias) {
  Tensor y = below_autograd([&] { return linear(x, w, bias); });
  const Tensor b = bias.value_or(Tensor());
  return record("LinearBackward0", {x, w, b}, y, {Save::input(x), Save::input(w)}, [](C& c) {
    const Tensor &x = c.saved[0], &w = c.saved[1], &g = c.grad();
    Tensor gx = c.needs[0] ? matmul(g, w) : Tensor();
    Tensor gw;
    if (c.needs[1]) {
      const int64_t k = x.dim() == 0 ? 1 : x.size(-1);
      const int64_t n = w.size(0);
      gw = mm(g.reshape({-1, n}).t(), x.reshape({-1, k}));
    }
    return Grads{gx, gw, c.needs[2] ? g : Tensor()};
  });
}

// ---------------------------------------------------------------- softmax

Tensor softmax_entry(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  Tensor y = below_autograd([&] { return softmax(x, dim, dtype); });
  return record("SoftmaxBackward0", {x}, y, {Save::out(0)}, [dim](C& c) {
    const Tensor& y = c.saved[0];
    Tensor gy = mul(c.grad(), y);
    const DimList d = y.dim() == 0 ? DimList{} : DimList{dim};
    return Grads{sub(gy, mul(y, sum(gy, d, true)))};
  });
}
Tensor log_softmax_entry(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  Tensor y = below_autograd([&] { return log_softmax(x, dim, dtype); });
  return record("LogSoftmaxBackward0", {x}, y, {Save::out(0)}, [dim](C& c) {
    const Tensor& y = c.saved[0];
    const DimList d = y.dim() == 0 ? DimList{} : DimList{dim};
    return Grads{sub(c.grad(), mul(exp(y), sum(c.grad(), d, true)))};
  });
}

// ---------------------------------------------------------------- rotary embedding

// RoPE rotates pairs by a fixed angle: the adjoint rotates back (sin negated). The
// tables are constants here (computed from positions); their gradient is not formed.
Tensor rope_entry(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  KILN_CHECK_KIND(!cos.requires_grad() && !sin.requires_grad(), NotImplemented, "apply_rotary_emb_cos_sin",
                  "the derivative with respect to the cos/sin tables is not implemented (detach them)");
  Tensor y = below_autograd([&] { return apply_rotary_emb_cos_sin(x, cos, sin, interleaved); });
  return record("RotaryEmbeddingBackward0", {x}, y, {Save::input(cos), Save::input(sin)}, [interleaved](C& c) {
    return Grads{apply_rotary_emb_cos_sin(c.grad(), c.saved[0], neg(c.saved[1]), interleaved)};
  });
}

// ---------------------------------------------------------------- pad

// The adjoint of constant padding is cropping, which is constant padding by the negated
// amounts. (The other modes are index_select gathers and record themselves.)
Tensor constant_pad_entry(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  Tensor y = below_autograd([&] { return pad(x, pads, "constant", value); });
  std::vector<int64_t> negated;
  for (int64_t p : pads) negated.push_back(-p);
  return record("ConstantPadNdBackward0", {x}, y, {}, [negated](C& c) {
    return Grads{pad(c.grad(), negated, "constant", 0.0)};
  });
}

const bool installed = [] {
  auto& h = autograd_hooks::op_hooks();
  h.matmul = [](const Tensor& a, const Tensor& b) { return product_entry<matmul>("MatmulBackward0", a, b); };
  h.mm = [](const Tensor& a, const Tensor& b) { return product_entry<mm>("MmBackward0", a, b); };
  h.bmm = [](const Tensor& a, const Tensor& b) { return product_entry<bmm>("BmmBackward0", a, b); };
  h.mv = [](const Tensor& a, const Tensor& b) { return product_entry<mv>("MvBackward0", a, b); };
  h.dot = [](const Tensor& a, const Tensor& b) { return product_entry<dot>("DotBackward0", a, b); };
  h.linear = linear_entry;
  h.softmax = softmax_entry;
  h.log_softmax = log_softmax_entry;
  h.apply_rotary_emb_cos_sin = rope_entry;
  h.constant_pad = constant_pad_entry;
  // Through the composites (recording stays on).
  h.rms_norm = composite::rms_norm;
  h.rms_norm_llama = composite::rms_norm_llama;
  h.rms_norm_one_plus = composite::rms_norm_one_plus;
  h.rms_norm_gated = composite::rms_norm_gated;
  h.layer_norm = composite::layer_norm;
  h.silu_and_mul = composite::silu_and_mul;
  h.scaled_dot_product_attention = composite::scaled_dot_product_attention;
  h.attention_decode = composite::attention_decode;
  h.linear_fp8 = composite::linear_fp8;
  h.moe_experts = composite::moe_experts;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
