// gradcheck of every backward formula in float64 (complex128 where the op takes
// complex), with contiguous, transposed, strided and broadcast inputs; gradgradcheck
// where the formulas are themselves differentiable.
#include <gtest/gtest.h>

#include "autograd_test_util.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/index.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using namespace autograd_test;
using V = std::vector<Tensor>;

TEST(AutogradFormulas, BinaryArithmeticWithBroadcasting) {
  const V in{transposed_leaf({3, 4}, 1), leaf({4}, 2)};
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return add(a, b, Scalar(2.5)); }), in);
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return sub(a, b, Scalar(0.5)); }), in);
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return mul(a, b); }), in);
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return maximum(a, b); }), in);
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return minimum(a, b); }), in);
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return atan2(a, b); }), in);
  const V pos{positive_leaf({3, 1}, 3), strided_leaf({3, 4}, 4)};
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return div(a, b); }), V{leaf({3, 1}, 5), pos[0]});
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return pow(a, b); }), pos);
  expect_gradcheck(one([](const Tensor& a) { return add(a, Scalar(3.0)); }), {leaf({5}, 6)});
  expect_gradcheck(one([](const Tensor& a) { return sub(a, Scalar(3.0), Scalar(2.0)); }), {leaf({5}, 6)});
  expect_gradcheck(one([](const Tensor& a) { return mul(a, Scalar(-1.5)); }), {leaf({5}, 6)});
  expect_gradcheck(one([](const Tensor& a) { return div(a, Scalar(4.0)); }), {leaf({5}, 6)});
  expect_gradcheck(one([](const Tensor& a) { return pow(a, Scalar(3.0)); }), {leaf({5}, 6)});
  expect_gradcheck(one([](const Tensor& a) { return pow(a, Scalar(1.7)); }), {positive_leaf({5}, 7)});
  expect_gradcheck(one([](const Tensor& a) { return pow(Scalar(2.0), a); }), {leaf({5}, 7)});
  expect_gradcheck(one([](const Tensor& a) { return remainder(a, Scalar(10.0)); }), {positive_leaf({5}, 7, 1.0)});
}

TEST(AutogradFormulas, Unary) {
  const Tensor x = transposed_leaf({3, 4}, 10);
  const Tensor p = positive_leaf({3, 4}, 11);
  // Away from the kinks (0.5 <= |x| < 1.5, both signs) for abs and relu.
  const Tensor far = mul(positive_leaf({3, 4}, 12), sign(leaf({3, 4}, 13))).detach().requires_grad_();
  expect_gradcheck(one([](const Tensor& t) { return abs(t); }), {far});
  expect_gradcheck(one([](const Tensor& t) { return relu(t); }), {far});
  expect_gradcheck(one([](const Tensor& t) { return neg(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return square(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return exp(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return exp2(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return expm1(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return log(t); }), {p});
  expect_gradcheck(one([](const Tensor& t) { return log2(t); }), {p});
  expect_gradcheck(one([](const Tensor& t) { return log1p(t); }), {p});
  expect_gradcheck(one([](const Tensor& t) { return sqrt(t); }), {p});
  expect_gradcheck(one([](const Tensor& t) { return rsqrt(t); }), {p});
  expect_gradcheck(one([](const Tensor& t) { return reciprocal(t); }), {p});
  expect_gradcheck(one([](const Tensor& t) { return sin(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return cos(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return tanh(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return sigmoid(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return silu(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return gelu(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return gelu(t, "tanh"); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return softplus(t, Scalar(2.0), Scalar(1.0)); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return floor(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return sign(t); }), {x});
}

TEST(AutogradFormulas, Selection) {
  const Tensor x = leaf({3, 4}, 20);
  const Tensor y = leaf({4}, 21);
  const Tensor cond = gt(leaf({3, 1}, 22).detach(), Scalar(0.0));
  expect_gradcheck(two([cond](const Tensor& a, const Tensor& b) { return where(cond, a, b); }), {x, y});
  expect_gradcheck(one([cond](const Tensor& a) { return where(cond, a, Scalar(1.0)); }), {x});
  expect_gradcheck(one([cond](const Tensor& a) { return where(cond, Scalar(1.0), a); }), {x});
  expect_gradcheck(one([](const Tensor& a) { return clamp(a, Scalar(-0.5), Scalar(0.7)); }), {x});
  expect_gradcheck(one([](const Tensor& a) { return clamp_min(a, Scalar(0.1)); }), {x});
  const Tensor lo = mul(ones({4}, DType::Float64), Scalar(-0.3)).requires_grad_();
  const Tensor hi = mul(ones({3, 1}, DType::Float64), Scalar(0.4)).requires_grad_();
  expect_gradcheck([](const V& v) { return V{clamp(v[0], v[1], v[2])}; }, {x, lo, hi});
  expect_gradcheck(one([cond](const Tensor& a) { return masked_fill(a, cond, Scalar(2.0)); }), {x});
  const Tensor value = mul(ones({}, DType::Float64), Scalar(3.0)).requires_grad_();
  expect_gradcheck(two([cond](const Tensor& a, const Tensor& v) { return masked_fill(a, cond, v); }), {x, value});
}

TEST(AutogradFormulas, Reductions) {
  const Tensor x = transposed_leaf({3, 4}, 30);
  expect_gradcheck(one([](const Tensor& t) { return sum(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return sum(t, {0}, true); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return mean(t, {-1}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return prod(t, {1}); }), {x});
  // prod with one and with two zeros in a row.
  Tensor zeros_in = leaf({2, 3}, 31).detach();
  zeros_in.select(0, 0).select(0, 1).fill_(Scalar(0.0));
  zeros_in.select(0, 1).select(0, 0).fill_(Scalar(0.0));
  zeros_in.select(0, 1).select(0, 2).fill_(Scalar(0.0));
  zeros_in.requires_grad_();
  expect_gradcheck(one([](const Tensor& t) { return prod(t, {1}); }), {zeros_in});
  expect_gradcheck(one([](const Tensor& t) { return amax(t, {0}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return amin(t, {1}, true); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return max(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return min(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return max(t, 1).values; }), {x});
  expect_gradcheck(one([](const Tensor& t) { return min(t, 0, true).values; }), {x});
  expect_gradcheck(one([](const Tensor& t) { return var(t, {1}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return kiln::std(t, {0}, 0.0, true); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return norm(t); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return norm(t, 1.0, {1}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return norm(t, 3.0, {0}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return norm(t, INFINITY, {1}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return cumsum(t, 1); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return sort(t, 1, true).values; }), {x});
  expect_gradcheck(one([](const Tensor& t) { return topk(t, 2, 0).values; }), {x});
}

TEST(AutogradFormulas, ViewsAndCopies) {
  const Tensor x = transposed_leaf({2, 3, 4}, 40);
  expect_gradcheck(one([](const Tensor& t) { return t.reshape({6, 4}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.contiguous().view({4, -1}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.permute({2, 0, 1}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.transpose(0, 2); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.narrow(2, 1, 2); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.slice(2, 1, std::nullopt, 2); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.select(1, -1); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.unsqueeze(1).squeeze(1); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.narrow(0, 0, 1).squeeze(); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.flatten(1); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.movedim(0, 2); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.clone(); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return t.unsqueeze(0).expand({5, 2, 3, 4}); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return abs(t.to(DType::Complex128)); }), {x});
}

TEST(AutogradFormulas, JoiningAndIndexing) {
  const Tensor a = leaf({2, 3}, 50), b = transposed_leaf({4, 3}, 51);
  expect_gradcheck(two([](const Tensor& p, const Tensor& q) { return cat({p, q}, 0); }), {a, b});
  expect_gradcheck(two([](const Tensor& p, const Tensor& q) { return stack({p, q.narrow(0, 0, 2)}, 1); }), {a, b});
  expect_gradcheck(one([](const Tensor& t) { return flip(t, {0, 1}); }), {b});
  const Tensor idx = indices({2, 0, 2, 3}, {4});
  expect_gradcheck(one([idx](const Tensor& t) { return index_select(t, 0, idx); }), {b});
  const Tensor gidx = indices({0, 1, 1, 1, 0, 0}, {2, 3});
  expect_gradcheck(one([gidx](const Tensor& t) { return gather(t, 0, gidx); }), {a});
  const Tensor src = leaf({2, 3}, 52);
  expect_gradcheck(two([gidx](const Tensor& t, const Tensor& s) { return scatter_add(t, 0, gidx.narrow(0, 0, 1).expand({2, 3}).contiguous(), s); }),
                   {leaf({3, 3}, 53), src});
  const Tensor source = leaf({2, 3}, 54);
  expect_gradcheck(two([](const Tensor& t, const Tensor& s) { return index_add(t, 0, indices({3, 3}, {2}), s, Scalar(2.0)); }),
                   {b, source});
  const Tensor tokens = indices({1, 3, 1, 0, 2, 3}, {2, 3});
  expect_gradcheck(one([tokens](const Tensor& w) { return embedding(w, tokens); }), {b});
  // padding_idx: its row gets no gradient (PyTorch's rule, deliberately not the
  // derivative, so checked by value); row 3 is looked up twice.
  const Tensor w = leaf({4, 3}, 55);
  autograd::backward({sum(embedding(w, tokens, 1))});
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(w.grad().select(0, 1).select(0, c).item().to_double(), 0.0);
    EXPECT_EQ(w.grad().select(0, 3).select(0, c).item().to_double(), 2.0);
  }
}

TEST(AutogradFormulas, Products) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3}, {3}}, {{2, 3}, {3}}, {{3}, {3, 4}}, {{2, 3}, {3, 4}}, {{5, 2, 3}, {3}}, {{3}, {5, 3, 2}},
      {{5, 2, 3}, {3, 4}}, {{2, 1, 2, 3}, {5, 3, 2}}, {{5, 2, 3}, {5, 3, 4}}};
  uint64_t seed = 60;
  for (const auto& [sa, sb] : cases) {
    expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return matmul(a, b); }),
                     {leaf(sa, seed++), leaf(sb, seed++)});
  }
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return mm(a, b); }),
                   {transposed_leaf({2, 3}, 70), transposed_leaf({3, 4}, 71)});
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return bmm(a, b); }),
                   {leaf({2, 2, 3}, 72), transposed_leaf({2, 3, 2}, 73)});
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return mv(a, b); }), {leaf({2, 3}, 74), leaf({3}, 75)});
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) { return dot(a, b); }), {leaf({3}, 76), leaf({3}, 77)});
  expect_gradcheck([](const V& v) { return V{linear(v[0], v[1], v[2])}; },
                   {leaf({2, 3, 4}, 78), transposed_leaf({5, 4}, 79), leaf({5}, 80)});
  expect_gradcheck(two([](const Tensor& x, const Tensor& w) { return linear(x, w); }), {leaf({4}, 81), leaf({5, 4}, 82)});
}

TEST(AutogradFormulas, SoftmaxAndNorms) {
  const Tensor x = transposed_leaf({3, 5}, 90);
  expect_gradcheck(one([](const Tensor& t) { return softmax(t, -1); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return softmax(t, 0); }), {x});
  expect_gradcheck(one([](const Tensor& t) { return log_softmax(t, 1); }), {x});
  const Tensor w = leaf({5}, 91), b = leaf({5}, 92);
  expect_gradcheck(two([](const Tensor& t, const Tensor& wt) { return rms_norm(t, {5}, wt, 1e-6); }), {x, w});
  expect_gradcheck([](const V& v) { return V{layer_norm(v[0], {5}, v[1], v[2])}; }, {x, w, b});
  expect_gradcheck(two([](const Tensor& t, const Tensor& wt) { return rms_norm_llama(t, wt, 1e-6); }), {x, w});
  expect_gradcheck(two([](const Tensor& t, const Tensor& wt) { return rms_norm_one_plus(t, wt, 1e-6); }), {x, w});
  expect_gradcheck([](const V& v) { return V{rms_norm_gated(v[0], v[1], v[2], 1e-6)}; }, {x, leaf({3, 5}, 93), w});
  expect_gradcheck(one([](const Tensor& t) { return silu_and_mul(t); }), {leaf({3, 6}, 94)});
}

TEST(AutogradFormulas, RotaryEmbedding) {
  const Tensor positions = indices({0, 3, 7}, {3});
  for (bool interleaved : {false, true}) {
    const RopeTables tables = rope_cos_sin(positions, 4, 10000.0, DType::Float64);
    expect_gradcheck(one([&](const Tensor& t) { return apply_rotary_emb_cos_sin(t, tables.cos, tables.sin, interleaved); }),
                     {leaf({2, 3, 2, 6}, 100)});
  }
  expect_gradcheck(one([&](const Tensor& t) { return apply_rotary_emb(t, positions, 10000.0); }), {leaf({3, 2, 4}, 101)});
}

TEST(AutogradFormulas, Attention) {
  const Tensor q = leaf({1, 4, 3, 4}, 110), k = leaf({1, 2, 5, 4}, 111), v = leaf({1, 2, 5, 3}, 112);
  expect_gradcheck([](const V& t) { return V{scaled_dot_product_attention(t[0], t[1], t[2], std::nullopt, 0.0, true,
                                                                          std::nullopt, true)}; },
                   {q, k, v});
  const Tensor mask = gt(leaf({3, 5}, 113).detach(), Scalar(-0.5));
  expect_gradcheck([mask](const V& t) {
    return V{scaled_dot_product_attention(t[0], t[1], t[2], mask, 0.0, false, 0.3)};
  }, {leaf({2, 3, 4}, 114), leaf({2, 5, 4}, 115), leaf({2, 5, 3}, 116)});
  expect_gradcheck([](const V& t) { return V{attention_decode(t[0], t[1], t[2], 3)}; },
                   {leaf({1, 4, 4}, 117), leaf({1, 2, 5, 4}, 118), leaf({1, 2, 5, 3}, 119)});
}

TEST(AutogradFormulas, MoeExpertsThroughItsComposite) {
  // moe_experts takes float32 at most: finite differences in float32 need a larger step
  // and tolerance (eps 1e-2 moves values by ~1e-2; float32 rounding of ~1e-7 relative
  // then leaves ~1e-5 of noise, far below atol).
  const int64_t T = 3, H = 4, I = 3, E = 3, K = 2;
  const auto f32 = [](const Tensor& t, double scale) {
    return mul(t.detach(), Scalar(scale)).to(DType::Float32).requires_grad_();
  };
  const Tensor ids = indices({0, 2, 1, 2, 0, 1}, {T, K}).to(DType::Int32);
  GradcheckOptions o;
  o.eps = 1e-2;
  o.atol = 2e-3;
  o.rtol = 2e-2;
  EXPECT_EQ(gradcheck_mismatch([ids](const V& t) {
    return V{moe_experts(t[0], t[1], ids, MoeExperts::from_fused(t[2], t[3]))};
  }, {f32(leaf({T, H}, 122), 1.0), f32(positive_leaf({T, K}, 123), 1.0), f32(leaf({E, 2 * I, H}, 120), 0.5),
      f32(leaf({E, H, I}, 121), 0.5)}, o), "");
}

TEST(AutogradFormulas, ComplexFollowsTheConjugateConvention) {
  const DType c = DType::Complex128;
  const Tensor a = leaf({3, 2}, 130, c), b = leaf({2}, 131, c);
  expect_gradcheck(two([](const Tensor& x, const Tensor& y) { return mul(x, y); }), {a, b});
  expect_gradcheck(two([](const Tensor& x, const Tensor& y) { return div(x, y); }), {a, b});
  expect_gradcheck(two([](const Tensor& x, const Tensor& y) { return sub(x, y, Scalar(std::complex<double>(1, 2))); }),
                   {a, b});
  expect_gradcheck(one([](const Tensor& x) { return exp(x); }), {a});
  expect_gradcheck(one([](const Tensor& x) { return log(x); }), {a});
  expect_gradcheck(one([](const Tensor& x) { return sqrt(x); }), {a});
  expect_gradcheck(one([](const Tensor& x) { return reciprocal(x); }), {a});
  expect_gradcheck(one([](const Tensor& x) { return abs(x); }), {a});
  expect_gradcheck(one([](const Tensor& x) { return sum(x, {0}); }), {a});
  expect_gradcheck(one([](const Tensor& x) { return mean(x); }), {a});
  expect_gradcheck(one([](const Tensor& x) { return autograd::conj(x); }), {a});
  expect_gradcheck(one([](const Tensor& x) { return mul(x, Scalar(std::complex<double>(0.5, -2))); }), {a});
  expect_gradcheck(two([](const Tensor& x, const Tensor& y) { return matmul(x, y); }),
                   {a.transpose(0, 1).detach().requires_grad_(), leaf({3, 4}, 132, c)});
  // A real input feeding a complex computation gets a real gradient.
  expect_gradcheck(two([](const Tensor& x, const Tensor& y) { return mul(x, y); }), {leaf({3, 2}, 133), b});
}

TEST(AutogradFormulas, DoubleBackward) {
  const Tensor x = leaf({2, 3}, 140), y = leaf({3}, 141);
  expect_gradgradcheck(two([](const Tensor& a, const Tensor& b) { return mul(a, b); }), {x, y});
  expect_gradgradcheck(two([](const Tensor& a, const Tensor& b) { return div(a, add(mul(b, b), Scalar(1.0))); }), {x, y});
  expect_gradgradcheck(one([](const Tensor& a) { return exp(a); }), {x});
  expect_gradgradcheck(one([](const Tensor& a) { return tanh(a); }), {x});
  expect_gradgradcheck(one([](const Tensor& a) { return sigmoid(a); }), {x});
  expect_gradgradcheck(one([](const Tensor& a) { return silu(a); }), {x});
  expect_gradgradcheck(one([](const Tensor& a) { return softmax(a, 1); }), {x});
  expect_gradgradcheck(one([](const Tensor& a) { return log_softmax(a, 0); }), {x});
  expect_gradgradcheck(one([](const Tensor& a) { return sum(mul(a, a), {1}); }), {x});
  expect_gradgradcheck(one([](const Tensor& a) { return pow(a, Scalar(3.0)); }), {x});
  expect_gradgradcheck(one([](const Tensor& a) { return a.transpose(0, 1).narrow(0, 1, 2); }), {x});
  expect_gradgradcheck(two([](const Tensor& a, const Tensor& b) { return matmul(a, b); }), {x, leaf({3, 2}, 142)});
  expect_gradgradcheck([](const V& v) { return V{layer_norm(v[0], {3}, v[1])}; }, {x, y});
  expect_gradgradcheck(one([](const Tensor& a) { return log(a); }), {positive_leaf({2, 3}, 143)});
}

}  // namespace
}  // namespace kiln
