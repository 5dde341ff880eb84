// frexp (every float32 class), logspace, heaviside, laguerre_polynomial_l (against the
// explicit sum), take, put_ and bincount (exact integers, skewed and many-bin input,
// several threads), and their errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/context.h"
#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/index_extra.h"
#include "kiln/ops/pointwise_extra.h"
#include "test_util.h"

using namespace kiln;
using kiln::testing::expect_error;

namespace {

template <typename T>
Tensor tensor_of(const std::vector<T>& v, DType dt) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, dt);
  std::copy(v.begin(), v.end(), t.data<T>());
  return t;
}

template <typename T>
std::vector<T> vec(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<T>(c.data<T>(), c.data<T>() + c.numel());
}

TEST(Frexp, EveryFloat32ClassReconstructsExactly) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                           std::bit_cast<float>(0x007fffffu), std::numeric_limits<float>::min(), 1.0f, -1.5f,
                           std::numeric_limits<float>::max(), inf, -inf, std::numeric_limits<float>::quiet_NaN()};
  // Every 4099th bit pattern: all exponents, both signs, subnormals, inf and NaN codes.
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099) xs.push_back(std::bit_cast<float>(uint32_t(bits)));
  FrexpResult r = frexp(tensor_of(xs, DType::Float32));
  ASSERT_EQ(r.exponent.dtype(), DType::Int32);
  const auto m = vec<float>(r.mantissa);
  const auto e = vec<int32_t>(r.exponent);
  for (size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i];
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(m[i]));
      EXPECT_EQ(e[i], 0);
    } else if (std::isinf(x) || x == 0.0f) {
      EXPECT_EQ(std::bit_cast<uint32_t>(m[i]), std::bit_cast<uint32_t>(x)) << x;  // sign of zero kept
      EXPECT_EQ(e[i], 0);
    } else {
      EXPECT_GE(std::abs(m[i]), 0.5f) << x;
      EXPECT_LT(std::abs(m[i]), 1.0f) << x;
      EXPECT_EQ(std::ldexp(static_cast<double>(m[i]), e[i]), static_cast<double>(x)) << x;
    }
  }
  // float64 and the narrow floats (computed through float32, exact).
  FrexpResult d = frexp(tensor_of<double>({3.0, -0.0, 1e-310}, DType::Float64));
  EXPECT_EQ(vec<double>(d.mantissa)[0], 0.75);
  EXPECT_EQ(vec<int32_t>(d.exponent)[0], 2);
  EXPECT_EQ(std::ldexp(vec<double>(d.mantissa)[2], vec<int32_t>(d.exponent)[2]), 1e-310);
  FrexpResult h = frexp(tensor_of<float>({6.0f}, DType::Float32).to(DType::BFloat16));
  EXPECT_EQ(h.mantissa.dtype(), DType::BFloat16);
  EXPECT_EQ(h.mantissa.to(DType::Float32).item().to_double(), 0.75);
  expect_error([] { frexp(ones({2}, DType::Int32)); }, ErrorKind::Runtime, "only supports floating-point dtypes");
}

TEST(Logspace, EdgesIntegerTruncationAndReference) {
  EXPECT_EQ(logspace(Scalar(1.0), Scalar(2.0), 0).numel(), 0);
  EXPECT_EQ(vec<float>(logspace(Scalar(2.0), Scalar(5.0), 1)), (std::vector<float>{100.0f}));
  EXPECT_EQ(vec<int64_t>(logspace(Scalar(0.0), Scalar(2.0), 3, 10.0, DType::Int64)), (std::vector<int64_t>{1, 10, 100}));
  // 2 ** linspace(0, 1, 5) truncated: 1, 1.18, 1.41, 1.68, 2.
  EXPECT_EQ(vec<int32_t>(logspace(Scalar(0.0), Scalar(1.0), 5, 2.0, DType::Int32)),
            (std::vector<int32_t>{1, 1, 1, 1, 2}));
  const auto v = vec<double>(logspace(Scalar(-3.0), Scalar(3.0), 13, 3.0, DType::Float64));
  for (int i = 0; i < 13; ++i) EXPECT_NEAR(v[i], std::pow(3.0, -3.0 + 0.5 * i), 4e-16 * std::pow(3.0, 3.0));
  expect_error([] { logspace(Scalar(0.0), Scalar(1.0), -1); }, ErrorKind::Runtime, "non-negative");
}

TEST(Heaviside, ZeroNanNegativeZeroBroadcastAndDtypes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor_of<float>({-2.0f, -0.0f, 0.0f, 3.0f, nan, -nan}, DType::Float32);
  EXPECT_EQ(vec<float>(heaviside(x, full({1}, Scalar(0.5)))), (std::vector<float>{0, 0.5f, 0.5f, 1, 0, 0}));
  Tensor xi = tensor_of<int64_t>({-1, 0, 5}, DType::Int64);
  EXPECT_EQ(vec<int64_t>(heaviside(xi, tensor_of<int64_t>({7, 8, 9}, DType::Int64))), (std::vector<int64_t>{0, 8, 1}));
  expect_error([&] { heaviside(x, full({1}, Scalar(0.5), DType::Float64)); }, ErrorKind::Runtime,
               "heaviside is not yet implemented for tensors with different dtypes");
  expect_error([&] { heaviside(ones({1}, DType::Complex64), ones({1}, DType::Complex64)); }, ErrorKind::Runtime,
               "complex");
}

// L_n(x) = sum_k C(n, k) (-x)^k / k!, in long double.
long double laguerre_sum(int n, long double x) {
  long double sum = 0, binom = 1, fact = 1, power = 1;
  for (int k = 0; k <= n; ++k) {
    if (k > 0) {
      binom = binom * (n - k + 1) / k;
      fact *= k;
      power *= -x;
    }
    sum += binom * power / fact;
  }
  return sum;
}

TEST(LaguerrePolynomialL, MatchesTheExplicitSumAndPyTorchsSpecialCases) {
  std::vector<double> xs, ns;
  for (int n = 0; n <= 12; ++n)
    for (double x : {-2.5, -0.3, 0.7, 1.0, 4.0}) {
      xs.push_back(x);
      ns.push_back(n);
    }
  const auto out = vec<double>(special::laguerre_polynomial_l(tensor_of(xs, DType::Float64), tensor_of(ns, DType::Float64)));
  for (size_t i = 0; i < xs.size(); ++i) {
    const double ref = static_cast<double>(laguerre_sum(static_cast<int>(ns[i]), xs[i]));
    // n steps of a three-term recurrence, each with a relative error of a few ulp.
    EXPECT_NEAR(out[i], ref, 64 * ns[i] * 1e-16 * std::max(1.0, std::abs(ref)) + 1e-15) << xs[i] << " " << ns[i];
  }
  Tensor x = tensor_of<float>({0.5f, 0.0f, 0.5f, 0.5f}, DType::Float32);
  Tensor n = tensor_of<float>({-1.0f, 5.0f, 2.9f, 1.0f}, DType::Float32);
  const auto s = vec<float>(special::laguerre_polynomial_l(x, n));
  EXPECT_EQ(s[0], 0.0f);                                             // n < 0
  EXPECT_EQ(s[1], 1.0f);                                             // x == 0
  EXPECT_FLOAT_EQ(s[2], static_cast<float>(laguerre_sum(2, 0.5L)));  // 2.9 truncates to 2
  EXPECT_EQ(s[3], 0.5f);                                             // 1 - x
  // Integer inputs promote to float32; a scalar n broadcasts.
  Tensor r = special::laguerre_polynomial_l(tensor_of<int64_t>({1, 2}, DType::Int64), Scalar(int64_t{3}));
  EXPECT_EQ(r.dtype(), DType::Float32);
  EXPECT_FLOAT_EQ(vec<float>(r)[0], static_cast<float>(laguerre_sum(3, 1.0L)));
  expect_error([] { special::laguerre_polynomial_l(ones({1}, DType::Float16), ones({1}, DType::Float16)); },
               ErrorKind::Runtime, "not implemented for 'Half'");
}

TEST(TakePut, ExactGathersScattersWrappingAndErrors) {
  Tensor a = arange(Scalar(int64_t{12}), DType::Int64).view({3, 4}).transpose(0, 1);  // non-contiguous
  // Logical order of a: 0 4 8 1 5 9 2 6 10 3 7 11.
  Tensor idx = tensor_of<int64_t>({0, 1, -1, -12, 5}, DType::Int64).view({5});
  EXPECT_EQ(vec<int64_t>(take(a, idx)), (std::vector<int64_t>{0, 4, 11, 0, 9}));
  EXPECT_EQ(take(a, idx.view({5, 1})).sizes(), (Shape{5, 1}));
  expect_error([&] { take(a, tensor_of<int64_t>({12}, DType::Int64)); }, ErrorKind::Index,
               "out of range: tried to access index 12 on a tensor of 12 elements.");
  expect_error([&] { take(a, tensor_of<int32_t>({1}, DType::Int32)); }, ErrorKind::Index,
               "Expected a long tensor for index");
  expect_error([&] { take(empty({0}), tensor_of<int64_t>({0}, DType::Int64)); }, ErrorKind::Index,
               "tried to take from an empty tensor");

  Tensor self = zeros({3, 4}, DType::Int64).transpose(0, 1);
  put_(self, tensor_of<int64_t>({0, -1, 3}, DType::Int64), tensor_of<int64_t>({5, 6, 7}, DType::Int64));
  EXPECT_EQ(vec<int64_t>(self.contiguous()), (std::vector<int64_t>{5, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 6}));
  // accumulate: duplicates sum exactly.
  Tensor acc = zeros({4}, DType::Int64);
  std::vector<int64_t> many(10000, 2);
  many[0] = -1;
  put_(acc, tensor_of(many, DType::Int64), ones({10000}, DType::Int64), true);
  EXPECT_EQ(vec<int64_t>(acc), (std::vector<int64_t>{0, 0, 9999, 1}));
  expect_error([&] { put_(acc, tensor_of<int64_t>({4}, DType::Int64), ones({1}, DType::Int64), true); },
               ErrorKind::Index, "out of range: tried to access index 4 on a tensor of 4 elements.");
  expect_error([&] { put_(acc, tensor_of<int64_t>({0}, DType::Int64), ones({1}, DType::Float32)); }, ErrorKind::Runtime,
               "self and source expected to have the same dtype");
  expect_error([&] { put_(acc, tensor_of<int64_t>({0, 1}, DType::Int64), ones({1}, DType::Int64)); },
               ErrorKind::Runtime, "Expected source and index to have the same number of elements");
  EXPECT_EQ(vec<int64_t>(acc), (std::vector<int64_t>{0, 0, 9999, 1}));  // failed calls wrote nothing
  Tensor copy = put(acc, tensor_of<int64_t>({0}, DType::Int64), full({1}, Scalar(int64_t{3}), DType::Int64));
  EXPECT_EQ(vec<int64_t>(copy)[0], 3);
  EXPECT_EQ(vec<int64_t>(acc)[0], 0);
}

std::vector<int64_t> bincount_ref(const std::vector<int64_t>& v, int64_t minlength) {
  int64_t bins = minlength;
  for (int64_t x : v) bins = std::max(bins, x + 1);
  std::vector<int64_t> out(bins, 0);
  for (int64_t x : v) ++out[x];
  return out;
}

TEST(Bincount, ExactOnSkewedUniformAndManyBinInputOnSeveralThreads) {
  for (int threads : {1, 2, 3}) {
    ThreadsScope scope(threads);
    Generator g(5);
    // Skewed: 99% one value (the interleaved per-thread histograms).
    Tensor r = randint(0, 100, {300001}, DType::Int64, &g);
    std::vector<int64_t> skewed = vec<int64_t>(r);
    for (size_t i = 0; i < skewed.size(); ++i) skewed[i] = skewed[i] == 0 ? static_cast<int64_t>(i % 17) : 7;
    EXPECT_EQ(vec<int64_t>(bincount(tensor_of(skewed, DType::Int64))), bincount_ref(skewed, 0));
    // Many bins, little data (the bin-range path).
    std::vector<int64_t> wide = vec<int64_t>(randint(0, 5000000, {200000}, DType::Int64, &g));
    EXPECT_EQ(vec<int64_t>(bincount(tensor_of(wide, DType::Int64))), bincount_ref(wide, 0));
    // int32 input, minlength past the largest value.
    std::vector<int32_t> small = {3, 1, 3};
    EXPECT_EQ(vec<int64_t>(bincount(tensor_of(small, DType::Int32), std::nullopt, 6)),
              (std::vector<int64_t>{0, 1, 0, 2, 0, 0}));
  }
  Tensor in = tensor_of<int64_t>({0, 2, 2, 5}, DType::Int64);
  Tensor wf = bincount(in, tensor_of<float>({0.5f, 1.0f, 2.0f, 4.0f}, DType::Float32));
  EXPECT_EQ(wf.dtype(), DType::Float32);
  EXPECT_EQ(vec<float>(wf), (std::vector<float>{0.5f, 0, 3.0f, 0, 0, 4.0f}));
  Tensor wi = bincount(in, tensor_of<int64_t>({1, 2, 3, 4}, DType::Int64));
  EXPECT_EQ(wi.dtype(), DType::Float64);
  EXPECT_EQ(vec<double>(wi), (std::vector<double>{1, 0, 5, 0, 0, 4}));
  EXPECT_EQ(vec<int64_t>(bincount(empty({0}, DType::Int64), std::nullopt, 3)), (std::vector<int64_t>{0, 0, 0}));
  expect_error([&] { bincount(tensor_of<int64_t>({1, -1}, DType::Int64)); }, ErrorKind::Runtime,
               "bincount only supports 1-d non-negative integral inputs");
  expect_error([&] { bincount(zeros({2, 2}, DType::Int64)); }, ErrorKind::Runtime, "1-d non-negative integral");
  expect_error([&] { bincount(ones({2}, DType::Float32)); }, ErrorKind::Runtime, "1-d non-negative integral");
  expect_error([&] { bincount(in, std::nullopt, -1); }, ErrorKind::Runtime, "minlength should be >= 0");
  expect_error([&] { bincount(in, ones({3})); }, ErrorKind::Runtime,
               "weights should be 1-d and have the same length as input");
}

}  // namespace
