// nn.functional.dropout: the zero/scale structure, the kept fraction, one mask per seed
// for any thread count, the p = 0 / p = 1 / eval edges, the backward and bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd_test_util.h"
#include "kiln/context.h"
#include "kiln/ops/dropout.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace autograd_test;
using testing::expect_error;

Tensor dropped(const Tensor& x, double p, uint64_t seed) {
  Generator gen(seed);
  return dropout(x, p, true, &gen);
}

TEST(Dropout, ZerosOrScaledAndKeptFraction) {
  const int64_t n = 20000;
  const Tensor x = add(rand({n}, DType::Float64), Scalar(1.0));  // in [1, 2): never 0
  for (double p : {0.1, 0.5, 0.9}) {
    const Tensor y = dropped(x, p, 3);
    const Tensor kept = ne(y, Scalar(0.0));
    // Survivors are x / (1 - p) exactly as a float64 product.
    const Tensor expected = mul(x, Scalar(1.0 / (1.0 - p)));
    EXPECT_EQ(sum(where(kept, ne(y, expected), Scalar(false)).to(DType::Int64)).item().to_int64(), 0);
    // The kept count is Binomial(n, 1 - p): within 5 standard deviations.
    const double count = static_cast<double>(sum(kept.to(DType::Int64)).item().to_int64());
    EXPECT_NEAR(count, n * (1 - p), 5 * std::sqrt(n * p * (1 - p))) << "p = " << p;
  }
}

TEST(Dropout, OneSeedOneMaskForAnyThreadCount) {
  const Tensor x = ones({4099}, DType::Float32);  // not a multiple of the lane width
  Tensor one_thread, four_threads;
  {
    ThreadsScope scope(1);
    one_thread = dropped(x, 0.3, 42);
  }
  {
    ThreadsScope scope(4);
    four_threads = dropped(x, 0.3, 42);
  }
  EXPECT_EQ(sum(ne(one_thread, four_threads).to(DType::Int64)).item().to_int64(), 0);
  EXPECT_GT(sum(ne(dropped(x, 0.3, 43), one_thread).to(DType::Int64)).item().to_int64(), 0);
}

TEST(Dropout, Edges) {
  const Tensor x = leaf({3, 4}, 1);
  EXPECT_TRUE(dropout(x, 0.0).is_same(x));
  EXPECT_TRUE(dropout(x, 0.7, false).is_same(x));
  const Tensor zeros_out = dropout(x, 1.0);
  EXPECT_EQ(sum(ne(zeros_out, Scalar(0.0)).to(DType::Int64)).item().to_int64(), 0);
  EXPECT_EQ(dropout(ones({0}), 0.5).numel(), 0);
  expect_error([&] { dropout(x, 1.5); }, ErrorKind::Value, "dropout probability has to be between 0 and 1, but got 1.5");
  expect_error([&] { dropout(x, -0.1); }, ErrorKind::Value, "between 0 and 1");
  expect_error([&] { dropout(ones({2}, DType::Int64), 0.5); }, ErrorKind::Type, "floating-point");
}

TEST(Dropout, BackwardUsesTheForwardMask) {
  const Tensor x = leaf({50}, 2);
  const Tensor y = dropped(x, 0.4, 9);
  autograd::backward({sum(y)});
  // d sum(y) / dx = mask / (1 - p) = y / x.
  const Tensor expected = div(y.detach(), x.detach());
  EXPECT_LT(amax(abs(sub(x.grad(), expected))).item().to_double(), 1e-12);
  expect_gradcheck(one([](const Tensor& t) { return dropped(t, 0.4, 9); }), {transposed_leaf({3, 5}, 3)});
}

TEST(Dropout, Dropout2dDropsWholeChannels) {
  const Tensor x = add(rand({3, 8, 4, 5}, DType::Float64), Scalar(1.0));  // never 0
  Generator gen(11);
  const Tensor y = dropout2d(x, 0.5, true, &gen);
  // Per channel: all 20 elements kept (scaled by 2) or all dropped.
  const Tensor kept = sum(ne(y, Scalar(0.0)).to(DType::Int64), {2, 3});
  const Tensor all_or_none = logical_or(eq(kept, Scalar(0)), eq(kept, Scalar(20)));
  EXPECT_EQ(sum(logical_not(all_or_none).to(DType::Int64)).item().to_int64(), 0);
  EXPECT_EQ(sum(where(ne(y, Scalar(0.0)), ne(y, mul(x, Scalar(2.0))), Scalar(false)).to(DType::Int64)).item().to_int64(), 0);
  const int64_t dropped_channels = sum(eq(kept, Scalar(0)).to(DType::Int64)).item().to_int64();
  EXPECT_GT(dropped_channels, 0);
  EXPECT_LT(dropped_channels, 24);
  expect_gradcheck(one([](const Tensor& t) {
    Generator g(4);
    return dropout2d(t, 0.5, true, &g);
  }), {leaf({2, 3, 2, 2}, 5)});
  expect_error([&] { dropout2d(ones({2, 3}), 0.5); }, ErrorKind::Runtime, "expected a 4-D input");
}

}  // namespace
}  // namespace kiln
