// conv1d / conv2d reference path: values against direct loops (stride, padding,
// dilation, groups), gradcheck of input, weight and bias, bad input.
#include <gtest/gtest.h>

#include "autograd_test_util.h"
#include "kiln/ops/conv.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace autograd_test;
using testing::expect_error;

TEST(Conv, Conv2dMatchesDirectLoops) {
  const int64_t N = 2, C = 4, H = 7, W = 6, O = 6, G = 2, kh = 3, kw = 2, s0 = 2, s1 = 1, p0 = 1, p1 = 2, d0 = 1, d1 = 2;
  const Tensor x = transposed_leaf({N, C, H, W}, 1).detach();
  const Tensor w = leaf({O, C / G, kh, kw}, 2).detach(), b = leaf({O}, 3).detach();
  const Tensor y = conv2d(x, w, b, {s0, s1}, {p0, p1}, {d0, d1}, G);
  const int64_t oh = (H + 2 * p0 - d0 * (kh - 1) - 1) / s0 + 1, ow = (W + 2 * p1 - d1 * (kw - 1) - 1) / s1 + 1;
  ASSERT_EQ(y.sizes(), (Shape{N, O, oh, ow}));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b.at({o}).to_double();
          const int64_t g = o / (O / G);
          for (int64_t c = 0; c < C / G; ++c)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t r = i * s0 + a * d0 - p0, q = j * s1 + e * d1 - p1;
                if (r < 0 || r >= H || q < 0 || q >= W) continue;
                acc += x.at({n, g * (C / G) + c, r, q}).to_double() * w.at({o, c, a, e}).to_double();
              }
          ASSERT_NEAR(y.at({n, o, i, j}).to_double(), acc, 1e-12);
        }
}

TEST(Conv, Gradcheck) {
  expect_gradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv2d(v[0], v[1], v[2], {2, 1}, {1, 0}, {1, 2}, 2)};
  }, {transposed_leaf({1, 4, 5, 4}, 4), leaf({2, 2, 2, 2}, 5), leaf({2}, 6)});
  expect_gradcheck([](const std::vector<Tensor>& v) { return std::vector<Tensor>{conv1d(v[0], v[1], std::nullopt, {1}, {1})}; },
                   {leaf({2, 3, 5}, 7), leaf({2, 3, 3}, 8)});
}

TEST(Conv, BadInput) {
  expect_error([] { conv2d(ones({1, 4, 5, 5}), ones({2, 3, 3, 3})); }, ErrorKind::Runtime, "expected input");
  expect_error([] { conv2d(ones({1, 4, 5, 5}), ones({3, 2, 3, 3}), std::nullopt, {1}, {0}, {1}, 2); },
               ErrorKind::Runtime, "divisible by groups");
  expect_error([] { conv2d(ones({1, 1, 2, 2}), ones({1, 1, 3, 3})); }, ErrorKind::Runtime,
               "Kernel size can't be greater than actual input size");
  expect_error([] { conv2d(ones({4, 5}), ones({1, 1, 1, 1})); }, ErrorKind::Runtime, "Expected 3D (unbatched) or 4D");
  expect_error([] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), std::nullopt, {0}); }, ErrorKind::Value,
               "stride and dilation must be positive");
}

}  // namespace
}  // namespace kiln
