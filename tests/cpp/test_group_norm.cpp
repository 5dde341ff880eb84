// nn.functional.group_norm: values against a float64 scalar reference, gradcheck
// (non-contiguous input, weight and bias), float32 within its tolerance, bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd_test_util.h"
#include "kiln/ops/group_norm.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace autograd_test;
using testing::expect_error;

// y[n, c, s] over groups of C / G channels, in plain loops.
std::vector<double> reference(const Tensor& x, int64_t G, const Tensor& w, const Tensor& b, double eps) {
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C), per = C / G;
  const Tensor flat = x.detach().contiguous().to(DType::Float64);
  const double* p = flat.data<double>();
  std::vector<double> out(flat.numel());
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      const int64_t start = (n * C + g * per) * S, count = per * S;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < count; ++i) mean += p[start + i];
      mean /= count;
      for (int64_t i = 0; i < count; ++i) var += (p[start + i] - mean) * (p[start + i] - mean);
      var /= count;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t c = g * per + i / S;
        out[start + i] = (p[start + i] - mean) / std::sqrt(var + eps) * w.at({c}).to_double() + b.at({c}).to_double();
      }
    }
  }
  return out;
}

TEST(GroupNorm, MatchesTheReference) {
  const Tensor x = transposed_leaf({2, 6, 5, 3}, 1);
  const Tensor w = leaf({6}, 2), b = leaf({6}, 3);
  for (int64_t G : {1, 2, 3, 6}) {
    const Tensor y = group_norm(x, G, w, b, 1e-5).contiguous();
    const std::vector<double> want = reference(x, G, w, b, 1e-5);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y.data<double>()[i], want[i], 1e-12) << "G " << G;
  }
  // float32: the statistics of 15 elements in float32, errors within a few ulp of the
  // normalised values (|y| < 10 here): 1e-5 absolute.
  const Tensor y32 = group_norm(x.detach().to(DType::Float32), 3, w.detach().to(DType::Float32),
                                b.detach().to(DType::Float32)).to(DType::Float64).contiguous();
  const std::vector<double> want = reference(x, 3, w, b, 1e-5);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y32.data<double>()[i], want[i], 1e-5);
}

TEST(GroupNorm, Gradcheck) {
  expect_gradcheck([](const std::vector<Tensor>& v) { return std::vector<Tensor>{group_norm(v[0], 2, v[1], v[2])}; },
                   {transposed_leaf({2, 4, 3}, 4), leaf({4}, 5), leaf({4}, 6)});
  expect_gradcheck(one([](const Tensor& t) { return group_norm(t, 3); }), {leaf({1, 6}, 7)});
}

TEST(GroupNorm, BadInput) {
  expect_error([] { group_norm(ones({2, 6, 3}), 4); }, ErrorKind::Runtime,
               "Expected number of channels in input to be divisible by num_groups");
  expect_error([] { group_norm(ones({6}), 2); }, ErrorKind::Runtime, "Expected at least 2 dimensions");
  expect_error([] { group_norm(ones({2, 6}), 2, ones({5})); }, ErrorKind::Runtime, "shape [6]");
  expect_error([] { group_norm(ones({2, 6}, DType::Int64), 2); }, ErrorKind::Type, "floating-point");
}

}  // namespace
}  // namespace kiln
