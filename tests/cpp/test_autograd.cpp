// The autograd engine: leaves, grad accumulation, backward/grad, grad mode, detach,
// version counters and the errors PyTorch raises.
#include <gtest/gtest.h>

#include <thread>

#include "autograd_test_util.h"
#include "kiln/autograd.h"
#include "kiln/grad_mode.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"

namespace kiln {
namespace {

using autograd_test::leaf;
using autograd_test::indices;
using testing::expect_error;

double value(const Tensor& t) { return t.item().to_double(); }

TEST(Autograd, LeavesAndRecordedResults) {
  Tensor plain = ones({3});
  EXPECT_FALSE(plain.requires_grad());
  EXPECT_TRUE(plain.is_leaf());
  EXPECT_FALSE(plain.has_autograd_meta());
  // Ops on tensors that do not require grad take no part in autograd at all.
  EXPECT_FALSE(mul(plain, plain).has_autograd_meta());

  Tensor x = ones({3}, DType::Float64).requires_grad_();
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  Tensor y = mul(x, Scalar(2.0));
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(autograd::grad_fn(y), nullptr);
  EXPECT_EQ(autograd::grad_fn(y)->name(), "MulBackward1");
  EXPECT_EQ(autograd::grad_fn(y)->next_edges()[0].function->name(), "AccumulateGrad");
  EXPECT_EQ(autograd::grad_fn(x), nullptr);
}

TEST(Autograd, BackwardAccumulatesIntoLeaves) {
  Tensor x = leaf({4}, 1);
  Tensor w = leaf({4}, 2);
  Tensor loss = sum(mul(x, w));
  autograd::backward({loss}, {}, true);
  ASSERT_TRUE(x.grad().defined());
  for (int64_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(value(x.grad().select(0, i)), value(w.select(0, i)));
  // A second backward adds to .grad (retained graph).
  autograd::backward({loss});
  for (int64_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(value(x.grad().select(0, i)), 2 * value(w.select(0, i)));
  // Shared gradients are copied into each leaf: changing one grad leaves the other alone.
  Tensor a = leaf({2}, 3), b = leaf({2}, 4);
  autograd::backward({sum(add(a, b))});
  {
    NoGradGuard no_grad;
    Tensor ga = a.grad();
    add_(ga, Scalar(1.0));
  }
  EXPECT_DOUBLE_EQ(value(b.grad().select(0, 0)), 1.0);
}

TEST(Autograd, GradReturnsWithoutTouchingDotGrad) {
  Tensor x = leaf({3}, 5);
  Tensor y = sum(mul(x, x));
  const auto g = autograd::grad({y}, {x});
  ASSERT_EQ(g.size(), 1u);
  for (int64_t i = 0; i < 3; ++i) EXPECT_NEAR(value(g[0].select(0, i)), 2 * value(x.select(0, i)), 1e-12);
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(g[0].requires_grad());
}

TEST(Autograd, GradOfIntermediateAndUnusedInputs) {
  Tensor x = leaf({3}, 6);
  Tensor h = exp(x);
  Tensor y = sum(mul(h, Scalar(3.0)));
  const auto g = autograd::grad({y}, {h}, {}, true);
  EXPECT_NEAR(value(g[0].select(0, 1)), 3.0, 1e-12);
  Tensor unused = leaf({2}, 7);
  expect_error([&] { autograd::grad({y}, {unused}, {}, true); }, ErrorKind::Runtime,
               "appears to not have been used in the graph");
  const auto g2 = autograd::grad({y}, {x, unused}, {}, true, false, true);
  EXPECT_TRUE(g2[0].defined());
  EXPECT_FALSE(g2[1].defined());
  expect_error([&] { autograd::grad({y}, {ones({2})}); }, ErrorKind::Runtime, "does not require grad");
}

TEST(Autograd, BadBackwardCalls) {
  Tensor x = leaf({3}, 8);
  Tensor y = mul(x, Scalar(2.0));
  expect_error([&] { autograd::backward({y}); }, ErrorKind::Runtime,
               "grad can be implicitly created only for scalar outputs");
  expect_error([&] { autograd::backward({ones({1})}); }, ErrorKind::Runtime,
               "element 0 of tensors does not require grad and does not have a grad_fn");
  expect_error([&] { autograd::backward({y}, {ones({2}, DType::Float64)}); }, ErrorKind::Runtime,
               "Mismatch in shape");
  // With an explicit gradient a non-scalar output is fine.
  autograd::backward({y}, {ones({3}, DType::Float64)});
  EXPECT_DOUBLE_EQ(value(x.grad().select(0, 2)), 2.0);
}

TEST(Autograd, BackwardTwiceWithoutRetainGraph) {
  Tensor x = leaf({3}, 9);
  Tensor y = sum(exp(x));  // exp saves its output
  autograd::backward({y});
  expect_error([&] { autograd::backward({y}); }, ErrorKind::Runtime,
               "Trying to backward through the graph a second time");
  // A graph whose nodes saved nothing may be run again, as in PyTorch.
  Tensor z = sum(add(x, Scalar(1.0)));
  autograd::backward({z});
  autograd::backward({z});
}

TEST(Autograd, InPlaceChangeOfASavedTensor) {
  Tensor x = leaf({3}, 10);
  Tensor h = mul(x, Scalar(1.0));
  Tensor y = sum(exp(h));  // exp's node saves its output e
  Tensor w = mul(h, h);    // mul saves h
  {
    NoGradGuard no_grad;
    add_(h, Scalar(1.0));  // bumps h's version
  }
  EXPECT_EQ(h.version(), 1);
  expect_error([&] { autograd::backward({sum(w)}); }, ErrorKind::Runtime,
               "one of the variables needed for gradient computation has been modified by an inplace operation");
  (void)y;
}

TEST(Autograd, InPlaceOnTensorsThatRequireGrad) {
  Tensor x = leaf({3}, 11);
  expect_error([&] { add_(x, Scalar(1.0)); }, ErrorKind::Runtime,
               "a leaf Variable that requires grad is being used in an in-place operation.");
  // Non-leaves and buffers are recorded (test_autograd_inplace.cpp); ops that do not
  // record in place still refuse rather than drop a gradient.
  Tensor y = mul(x, Scalar(2.0));
  expect_error([&] { scatter_add_(y, 0, indices({0}, {1}), x.narrow(0, 0, 1)); }, ErrorKind::NotImplemented,
               "in-place");
  Tensor buffer = zeros({3}, DType::Float64);
  expect_error([&] { index_add_(buffer, 0, indices({0}, {1}), x.narrow(0, 0, 1)); }, ErrorKind::NotImplemented,
               "requires grad");
  // Under no_grad (an optimiser step) in-place updates of leaves are allowed.
  {
    NoGradGuard no_grad;
    sub_(x, Scalar(0.5));
    buffer.copy_(x);
  }
  EXPECT_EQ(x.version(), 1);
}

TEST(Autograd, GradModeIsPerThreadAndNests) {
  Tensor x = leaf({2}, 12);
  EXPECT_TRUE(GradMode::is_enabled());
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(mul(x, x).requires_grad());
    {
      EnableGradGuard enable;
      EXPECT_TRUE(mul(x, x).requires_grad());
    }
    bool other_thread_enabled = false;
    std::thread t([&] { other_thread_enabled = GradMode::is_enabled(); });
    t.join();
    EXPECT_TRUE(other_thread_enabled);
  }
  EXPECT_TRUE(GradMode::is_enabled());
}

TEST(Autograd, DetachSharesDataAndVersion) {
  Tensor x = leaf({3}, 13);
  Tensor y = mul(x, Scalar(2.0));
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data_ptr(), y.data_ptr());
  d.fill_(Scalar(0.0));
  EXPECT_EQ(y.version(), d.version());
  EXPECT_DOUBLE_EQ(value(y.select(0, 0)), 0.0);
  Tensor z = mul(x, Scalar(3.0));
  z.detach_();
  EXPECT_FALSE(z.requires_grad());
  EXPECT_TRUE(z.is_leaf());
}

TEST(Autograd, RequiresGradRules) {
  Tensor i = ones({2}, DType::Int64);
  expect_error([&] { i.requires_grad_(); }, ErrorKind::Runtime,
               "only Tensors of floating point and complex dtype can require gradients");
  Tensor x = leaf({2}, 14);
  Tensor y = mul(x, x);
  expect_error([&] { y.requires_grad_(false); }, ErrorKind::Runtime,
               "you can only change requires_grad flags of leaf variables");
  x.requires_grad_(false);
  EXPECT_FALSE(x.has_autograd_meta());
  // Comparisons and argmax give results outside autograd.
  Tensor z = leaf({3}, 15);
  EXPECT_FALSE(gt(z, Scalar(0.0)).requires_grad());
  EXPECT_FALSE(argmax(z).requires_grad());
}

TEST(Autograd, ViewsKeepGradientFlow) {
  Tensor x = leaf({2, 3}, 16);
  Tensor v = x.transpose(0, 1).select(0, 2).unsqueeze(0);  // x[:, 2] as [1, 2]
  autograd::backward({sum(mul(v, Scalar(5.0)))});
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 3; ++c) EXPECT_DOUBLE_EQ(value(x.grad().select(0, r).select(0, c)), c == 2 ? 5.0 : 0.0);
  }
}

TEST(Autograd, CreateGraphGivesSecondDerivatives) {
  Tensor x = leaf({3}, 17);
  Tensor y = sum(mul(mul(x, x), x));  // sum x^3
  const auto g = autograd::grad({y}, {x}, {}, std::nullopt, true);
  EXPECT_TRUE(g[0].requires_grad());
  const auto gg = autograd::grad({sum(g[0])}, {x});
  for (int64_t i = 0; i < 3; ++i) EXPECT_NEAR(value(gg[0].select(0, i)), 6 * value(x.select(0, i)), 1e-12);
}

TEST(Autograd, BackwardWithInputsLimitsAccumulation) {
  Tensor a = leaf({2}, 18), b = leaf({2}, 19);
  autograd::backward({sum(mul(a, b))}, {}, std::nullopt, false, {a});
  EXPECT_TRUE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

TEST(Autograd, OpsWithoutFormulaRefuseToRecord) {
  Tensor x = leaf({4}, 20);
  expect_error([&] { x.as_strided({2}, {2}); }, ErrorKind::NotImplemented, "the derivative for 'as_strided'");
  expect_error([&] { masked_select(x, gt(x, Scalar(0.0))); }, ErrorKind::NotImplemented, "masked_select");
  // Under no_grad they run.
  NoGradGuard no_grad;
  EXPECT_EQ(x.as_strided({2}, {2}).numel(), 2);
}

}  // namespace
}  // namespace kiln
