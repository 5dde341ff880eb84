// nn.functional.interpolate: nearest and linear against a scalar reference (PyTorch's
// index formulas), gradcheck of every mode (the backward is the exact adjoint), bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd_test_util.h"
#include "kiln/ops/interpolate.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace autograd_test;
using testing::expect_error;

// 1-D reference: out[n, c, j] from x[n, c, :] with PyTorch's formulas (double scale,
// float64 input, as its CPU kernel).
double reference_1d(const Tensor& x, int64_t n, int64_t c, int64_t j, int64_t out, const std::string& mode,
                    bool align) {
  const int64_t in = x.size(2);
  const double scale = align ? (out > 1 ? double(in - 1) / double(out - 1) : 0.0) : double(in) / double(out);
  const auto at = [&](int64_t i) { return x.at({n, c, i}).to_double(); };
  if (mode == "nearest") return at(std::min<int64_t>(std::floor(float(j * float(scale))), in - 1));
  if (mode == "nearest-exact") return at(std::min<int64_t>(std::floor(float((j + 0.5) * float(scale))), in - 1));
  const double pos = align ? j * scale : std::max((j + 0.5) * scale - 0.5, 0.0);
  const int64_t i0 = std::min<int64_t>(std::floor(pos), in - 1), i1 = std::min<int64_t>(i0 + 1, in - 1);
  const double w1 = std::min(pos - double(i0), 1.0);
  return at(i0) * (1 - w1) + at(i1) * w1;
}

TEST(Interpolate, MatchesTheReference1d) {
  const Tensor x = transposed_leaf({2, 3, 7}, 1).detach();
  for (const std::string mode : {"nearest", "nearest-exact", "linear"}) {
    for (int64_t out : {1, 3, 7, 16}) {
      for (bool align : {false, true}) {
        if (mode != "linear" && align) continue;
        const Tensor y = interpolate(x, {out}, {}, mode, mode == "linear" ? std::optional<bool>(align) : std::nullopt);
        ASSERT_EQ(y.sizes(), (Shape{2, 3, out}));
        for (int64_t n = 0; n < 2; ++n)
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t j = 0; j < out; ++j)
              ASSERT_NEAR(y.at({n, c, j}).to_double(), reference_1d(x, n, c, j, out, mode, align), 1e-14)
                  << mode << " out " << out << " align " << align;
      }
    }
  }
}

TEST(Interpolate, GradcheckEveryMode) {
  expect_gradcheck(one([](const Tensor& t) { return interpolate(t, {}, {2.0}, "nearest"); }), {leaf({1, 2, 3, 4}, 2)});
  expect_gradcheck(one([](const Tensor& t) { return interpolate(t, {5, 3}, {}, "nearest-exact"); }),
                   {transposed_leaf({1, 2, 3, 4}, 3)});
  expect_gradcheck(one([](const Tensor& t) { return interpolate(t, {5, 7}, {}, "bilinear", false); }),
                   {leaf({1, 2, 3, 4}, 4)});
  expect_gradcheck(one([](const Tensor& t) { return interpolate(t, {2, 3}, {}, "bilinear", true); }),
                   {leaf({1, 2, 3, 4}, 5)});
  expect_gradcheck(one([](const Tensor& t) { return interpolate(t, {}, {1.5}, "trilinear", false); }),
                   {leaf({1, 1, 2, 3, 2}, 6)});
}

TEST(Interpolate, BadInput) {
  const Tensor x = ones({1, 2, 3, 4});
  expect_error([&] { interpolate(x, {4}, {2.0}); }, ErrorKind::Value, "only one of size or scale_factor");
  expect_error([&] { interpolate(x, {}, {}); }, ErrorKind::Value, "only one of size or scale_factor");
  expect_error([&] { interpolate(x, {4}, {}, "linear"); }, ErrorKind::Value, "not supported for 4-D input");
  expect_error([&] { interpolate(x, {4}, {}, "nearest", true); }, ErrorKind::Value, "align_corners option");
  expect_error([&] { interpolate(ones({3, 4}), {4}); }, ErrorKind::Runtime, "expected a 3-D, 4-D or 5-D input");
  expect_error([&] { interpolate(x, {2, 3, 4}); }, ErrorKind::Value, "one per spatial dim");
  expect_error([&] { interpolate(x, {}, {0.1}); }, ErrorKind::Runtime, "greater than 0");
}

}  // namespace
}  // namespace kiln
