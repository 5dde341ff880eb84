// In-place ops under autograd, PyTorch's rules: a leaf that requires grad (or a view of
// one) refuses them; on a non-leaf they replace grad_fn and bump the version; a buffer
// written from a tensor that requires grad joins the graph; an in-place op on a view
// rebases its base (CopySlices); a tensor saved for backward and then modified makes
// backward raise. Gradients are checked by gradcheck against finite differences.
#include <gtest/gtest.h>

#include "autograd_test_util.h"
#include "kiln/ops/elementwise_inplace.h"
#include "kiln/ops/index.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace autograd_test;
using V = std::vector<Tensor>;
using kiln::testing::expect_error;

// f(x) = in_place(x * 1.5 + 0.25), a non-leaf written in place.
template <typename F>
Function on_non_leaf(F in_place) {
  return [in_place](const V& x) {
    Tensor y = add(mul(x[0], Scalar(1.5)), Scalar(0.25));
    in_place(y);
    return V{y};
  };
}

TEST(AutogradInPlace, LeafAndViewOfLeafRefuse) {
  Tensor x = leaf({3}, 1);
  expect_error([&] { add_(x, Scalar(1.0)); }, ErrorKind::Runtime,
               "a leaf Variable that requires grad is being used in an in-place operation.");
  expect_error([&] { exp_(x); }, ErrorKind::Runtime, "exp_: a leaf Variable that requires grad");
  expect_error([&] { x.fill_(Scalar(0.0)); }, ErrorKind::Runtime, "fill_: a leaf Variable");
  expect_error([&] { x.zero_(); }, ErrorKind::Runtime, "a leaf Variable");
  expect_error([&] { masked_fill_(x, gt(x, Scalar(0.0)), Scalar(1.0)); }, ErrorKind::Runtime, "a leaf Variable");
  Tensor v = x.narrow(0, 0, 2);
  expect_error([&] { mul_(v, Scalar(2.0)); }, ErrorKind::Runtime,
               "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  EXPECT_EQ(x.version(), 0);  // refused before writing anything
}

TEST(AutogradInPlace, NonLeafGetsNewHistoryAndVersion) {
  Tensor x = leaf({4}, 2);
  Tensor y = mul(x, Scalar(2.0));
  const auto before = y.version();
  const Tensor c = y.detach().clone();  // a constant copy of y
  mul_(y, c);
  EXPECT_EQ(y.version(), before + 1);
  EXPECT_EQ(autograd::grad_fn(y)->name(), "MulBackward0");
  autograd::backward({sum(y)});
  // d/dx sum(2x * c) with c = 2x held constant = 2c = 4x.
  const Tensor expected = mul(x.detach(), Scalar(4.0));
  EXPECT_LT(amax(abs(sub(x.grad(), expected))).item().to_double(), 1e-12);
  // An operand that aliases self (y.mul_(y.detach())) was saved before the write that
  // changes it: backward raises, as in PyTorch, rather than use the new value.
  Tensor z = mul(x, Scalar(2.0));
  mul_(z, z.detach());
  expect_error([&] { autograd::backward({sum(z)}); }, ErrorKind::Runtime, "modified by an inplace operation");
}

TEST(AutogradInPlace, ArithmeticAndUnaryGradcheck) {
  const Tensor x = transposed_leaf({3, 4}, 3);
  const Tensor o = leaf({4}, 4);
  expect_gradcheck(two([](const Tensor& a, const Tensor& b) {
                     Tensor y = mul(a, Scalar(1.0));
                     add_(y, b, Scalar(2.0));
                     sub_(y, mul(b, b));
                     mul_(y, b);
                     div_(y, add(mul(b, b), Scalar(1.0)));
                     return y;
                   }),
                   {x, o});
  expect_gradcheck(on_non_leaf([](Tensor& y) { exp_(y); }), {x});
  expect_gradcheck(on_non_leaf([](Tensor& y) { tanh_(y); }), {x});
  expect_gradcheck(on_non_leaf([](Tensor& y) { sigmoid_(y); }), {x});
  expect_gradcheck(on_non_leaf([](Tensor& y) { neg_(y); }), {x});
  expect_gradcheck(on_non_leaf([](Tensor& y) { sin_(y); }), {x});
  expect_gradcheck(on_non_leaf([](Tensor& y) { clamp_(y, Scalar(-0.5), Scalar(0.6)); }), {x});
  expect_gradcheck(on_non_leaf([](Tensor& y) { add_(y, Scalar(1.0)); mul_(y, Scalar(-2.0)); }), {x});
  expect_gradcheck(on_non_leaf([](Tensor& y) { masked_fill_(y, gt(y, Scalar(0.3)), Scalar(7.0)); }), {x});
  expect_gradcheck(on_non_leaf([](Tensor& y) { y.fill_(Scalar(2.0)); mul_(y, Scalar(3.0)); }), {x});
  // Away from relu's kink.
  const Tensor far = mul(positive_leaf({3, 4}, 5), sign(leaf({3, 4}, 6))).detach().requires_grad_();
  expect_gradcheck(on_non_leaf([](Tensor& y) { relu_(y); }), {far});
  // Tensor bounds that require grad are sources of clamp_.
  expect_gradcheck(two([](const Tensor& a, const Tensor& lo) {
                     Tensor y = mul(a, Scalar(1.0));
                     clamp_(y, std::optional<Tensor>(lo), std::optional<Tensor>());
                     return y;
                   }),
                   {x, leaf({4}, 7)});
  expect_gradgradcheck(on_non_leaf([](Tensor& y) { exp_(y); mul_(y, Scalar(0.5)); sigmoid_(y); }), {leaf({3}, 8)});
}

TEST(AutogradInPlace, CopyIntoABufferJoinsTheGraph) {
  const Tensor w = leaf({3}, 10);
  expect_gradcheck(one([](const Tensor& a) {
                     Tensor buffer = zeros({2, 3}, DType::Float64);
                     buffer.copy_(a);  // broadcast: each row is a
                     mul_(buffer, Scalar(3.0));
                     return buffer;
                   }),
                   {w});
  Tensor buffer = zeros({3}, DType::Float32);
  add_(buffer, w);  // a float64 source into a float32 buffer: cast, as the op does
  EXPECT_TRUE(buffer.requires_grad());
  EXPECT_FALSE(buffer.is_leaf());
  autograd::backward({sum(buffer)});
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::Float64);
  // A part of a buffer that does not require grad cannot rebase it: refused.
  Tensor big = zeros({6}, DType::Float64);
  Tensor part = big.narrow(0, 0, 3);
  expect_error([&] { part.copy_(w); }, ErrorKind::NotImplemented, "view");
}

TEST(AutogradInPlace, ViewOfNonLeafRebasesItsBase) {
  // y = 2x; y[1:3] *= w; y[0] = 5; loss through the base.
  expect_gradcheck(two([](const Tensor& a, const Tensor& w) {
                     Tensor y = mul(a, Scalar(2.0));
                     Tensor part = y.narrow(0, 1, 2);
                     mul_(part, w);
                     y.select(0, 0).fill_(Scalar(5.0));
                     return V{y}[0];
                   }),
                   {leaf({4}, 20), leaf({2}, 21)});
  // Through a transposed 2-D view, and the view itself used afterwards.
  expect_gradcheck([](const V& in) {
    Tensor y = sin(in[0]);  // sin saves its input, not y (which is written below)
    Tensor col = y.transpose(0, 1).select(0, 1);  // column 1
    add_(col, in[1]);
    return V{y, mul(col, Scalar(3.0))};
  }, {leaf({3, 2}, 22), leaf({3}, 23)});
  Tensor x = leaf({4}, 24);
  Tensor y = mul(x, Scalar(1.0));
  Tensor v = y.narrow(0, 0, 2);
  v.copy_(mul(x.narrow(0, 2, 2), Scalar(3.0)));
  EXPECT_EQ(autograd::grad_fn(y)->name(), "CopySlices");
  autograd::backward({sum(y)});
  // y = [3 x2, 3 x3, x2, x3]: dx = [0, 0, 4, 4].
  const double expected[] = {0, 0, 4, 4};
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(x.grad().data<double>()[i], expected[i]) << i;
}

TEST(AutogradInPlace, SavedTensorModifiedLaterRaises) {
  Tensor x = leaf({3}, 30);
  Tensor h = mul(x, Scalar(1.0));
  Tensor e = exp(h);  // saves its output
  Tensor w = mul(h, h);  // saves h
  add_(e, Scalar(1.0));
  expect_error([&] { autograd::backward({sum(e)}); }, ErrorKind::Runtime,
               "one of the variables needed for gradient computation has been modified by an inplace operation: "
               "[float64 [3]], which is output 0 of ExpBackward0, is at version 1; expected version 0 instead.");
  mul_(h, Scalar(2.0));
  expect_error([&] { autograd::backward({sum(w)}); }, ErrorKind::Runtime,
               "modified by an inplace operation");
}

TEST(AutogradInPlace, UnaryInPlaceValuesAndErrors) {
  Tensor t = Tensor::empty({3}, DType::Float32);
  const float v[] = {-1.0f, 0.5f, 2.0f};
  std::copy(v, v + 3, t.data<float>());
  relu_(t);
  EXPECT_EQ(t.data<float>()[0], 0.0f);
  EXPECT_EQ(t.data<float>()[2], 2.0f);
  clamp_(t, Scalar(1.0), std::nullopt);
  EXPECT_EQ(t.data<float>()[1], 1.0f);
  EXPECT_EQ(t.version(), 2);  // one write each
  Tensor ints = zeros({2}, DType::Int64);
  expect_error([&] { exp_(ints); }, ErrorKind::Runtime, "exp_: result type Float can't be cast to the desired output type Long");
}

}  // namespace
}  // namespace kiln
