// nn.functional.pad: every mode against a scalar reference (1-3 padded dims, negative
// pads, strided input), gradcheck of each mode, and bad input.
#include <gtest/gtest.h>

#include "autograd_test_util.h"
#include "kiln/ops/pad.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace autograd_test;
using testing::expect_error;

// The source position of output position j along a dim of size n padded by `left`, or
// -1 for a constant fill.
int64_t reference_source(const std::string& mode, int64_t j, int64_t n, int64_t left) {
  int64_t s = j - left;
  if (mode == "constant") return s >= 0 && s < n ? s : -1;
  if (mode == "reflect") return s < 0 ? -s : (s >= n ? 2 * (n - 1) - s : s);
  if (mode == "replicate") return std::clamp<int64_t>(s, 0, n - 1);
  return ((s % n) + n) % n;
}

void expect_matches_reference(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode,
                              double value = 0.0) {
  SCOPED_TRACE(mode + " " + shape_to_string(Shape(pads.begin(), pads.end())) + " of " + x.shape_str());
  const Tensor y = pad(x.detach(), pads, mode, mode == "constant" ? std::optional<double>(value) : std::nullopt);
  const int64_t k = static_cast<int64_t>(pads.size()) / 2;
  Shape expected = x.sizes();
  for (int64_t i = 0; i < k; ++i) expected[x.dim() - 1 - i] += pads[2 * i] + pads[2 * i + 1];
  ASSERT_EQ(y.sizes(), expected);
  for (int64_t flat = 0; flat < y.numel(); ++flat) {
    Shape index(y.dim());
    for (int64_t d = y.dim() - 1, rest = flat; d >= 0; --d) {
      index[d] = rest % y.size(d);
      rest /= y.size(d);
    }
    Shape src = index;
    bool fill = false;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t d = x.dim() - 1 - i;
      src[d] = reference_source(mode, index[d], x.size(d), pads[2 * i]);
      fill = fill || src[d] < 0;
    }
    const double want = fill ? value : x.at(src).to_double();
    ASSERT_EQ(y.at(index).to_double(), want);
  }
}

TEST(Pad, ModesMatchTheReference) {
  const Tensor x3 = transposed_leaf({2, 5, 4}, 1);   // non-contiguous
  const Tensor x4 = strided_leaf({1, 2, 4, 5}, 2);   // strided
  const Tensor x5 = leaf({1, 1, 3, 4, 5}, 3);
  for (const std::string mode : {"constant", "reflect", "replicate", "circular"}) {
    expect_matches_reference(x3, {2, 3}, mode);
    expect_matches_reference(x3, {1, 0, 3, 2}, mode);
    expect_matches_reference(x4, {0, 3, 2, 1}, mode);
    expect_matches_reference(x5, {1, 2, 2, 1, 2, 2}, mode);
    expect_matches_reference(x3, {-1, 2, 1, -2}, mode);  // negative pads crop
  }
  expect_matches_reference(x3, {1, 1, 1, 1, 1, 1}, "constant", 2.5);  // every dim, a value
  expect_matches_reference(x3, {-3, -1}, "constant");                // cropped to nothing
}

TEST(Pad, ReflectMatchesTheDocumentedExample) {
  Tensor x = arange(Scalar(1.0), Scalar(9.0), Scalar(1.0), DType::Float64).view({1, 8});
  const Tensor y = pad(x, {2, 3}, "reflect");
  const double want[] = {3, 2, 1, 2, 3, 4, 5, 6, 7, 8, 7, 6, 5};
  for (int64_t j = 0; j < 13; ++j) EXPECT_EQ(y.at({0, j}).to_double(), want[j]);
}

TEST(Pad, GradcheckEveryMode) {
  for (const std::string mode : {"constant", "reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    expect_gradcheck(one([mode](const Tensor& t) { return pad(t, {2, 1, 1, 2}, mode); }),
                     {transposed_leaf({2, 4, 3}, 10)});
    expect_gradcheck(one([mode](const Tensor& t) { return pad(t, {-1, 2}, mode); }), {leaf({2, 4}, 11)});
  }
  expect_gradgradcheck(one([](const Tensor& t) { return pad(t, {1, -1, 2, 0}, "constant", 3.0); }), {leaf({2, 3}, 12)});
}

TEST(Pad, BadInput) {
  const Tensor x = ones({1, 2, 3});
  expect_error([&] { pad(x, {1}); }, ErrorKind::Runtime, "Padding length must be divisible by 2");
  expect_error([&] { pad(x, {1, 1, 1, 1, 1, 1, 1, 1}); }, ErrorKind::Runtime, "Padding length should be less");
  expect_error([&] { pad(x, {3, 0}, "reflect"); }, ErrorKind::Runtime,
               "Argument #4: Padding size should be less than the corresponding input dimension");
  expect_error([&] { pad(x, {4, 0}, "circular"); }, ErrorKind::Runtime, "wrapping around more than once");
  expect_error([&] { pad(x, {1, 1}, "wrap"); }, ErrorKind::Value, "Unrecognised padding mode");
  expect_error([&] { pad(x, {1, 1}, "reflect", 1.0); }, ErrorKind::Value, "doesn't take in value argument");
  expect_error([&] { pad(ones({3}), {1, 1}, "reflect"); }, ErrorKind::Runtime, "expects a 2-D or 3-D");
  expect_error([&] { pad(x, {-2, -2}); }, ErrorKind::Runtime, "resulted in a negative output size");
  expect_error([&] { pad(x, {-2, -1}, "replicate"); }, ErrorKind::Runtime, "too small");
}

}  // namespace
}  // namespace kiln
