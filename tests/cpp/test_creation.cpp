// Creation ops against PyTorch's documented values and the generator's determinism.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/thread_pool.h"

using namespace kiln;

TEST(Creation, FullZerosOnesDtypes) {
  EXPECT_EQ(full({2}, Scalar(int64_t{3})).dtype(), DType::Int64);
  EXPECT_EQ(full({2}, Scalar(1.5)).dtype(), DType::Float32);
  EXPECT_EQ(full({2}, Scalar(true)).dtype(), DType::Bool);
  EXPECT_EQ(full({2}, Scalar(1.5), DType::BFloat16).at({1}).to_double(), 1.5);
  Tensor z = zeros({3, 0});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(ones({2, 2}, DType::Float8_e4m3fn).to(DType::Float32).at({1, 1}).to_double(), 1.0);
  EXPECT_THROW(zeros({-1}), Error);
}

TEST(Creation, Arange) {
  Tensor a = arange(Scalar(int64_t{5}));
  EXPECT_EQ(a.dtype(), DType::Int64);
  EXPECT_EQ(a.numel(), 5);
  Tensor b = arange(Scalar(1.0), Scalar(2.0), Scalar(0.3));
  EXPECT_EQ(b.dtype(), DType::Float32);
  ASSERT_EQ(b.numel(), 4);  // 1.0, 1.3, 1.6, 1.9
  EXPECT_NEAR(b.at({3}).to_double(), 1.9, 1e-6);
  Tensor c = arange(Scalar(int64_t{10}), Scalar(int64_t{0}), Scalar(int64_t{-3}));  // 10 7 4 1
  ASSERT_EQ(c.numel(), 4);
  EXPECT_EQ(c.at({3}).to_int64(), 1);
  EXPECT_EQ(arange(Scalar(int64_t{3}), Scalar(int64_t{3})).numel(), 0);
  EXPECT_THROW(arange(Scalar(int64_t{0}), Scalar(int64_t{5}), Scalar(int64_t{0})), Error);
  EXPECT_THROW(arange(Scalar(int64_t{5}), Scalar(int64_t{0}), Scalar(int64_t{1})), Error);
}

TEST(Creation, LinspaceEndsExactly) {
  Tensor l = linspace(Scalar(0.0), Scalar(1.0), 7, DType::Float64);
  ASSERT_EQ(l.numel(), 7);
  EXPECT_EQ(l.at({0}).to_double(), 0.0);
  EXPECT_EQ(l.at({6}).to_double(), 1.0);
  EXPECT_NEAR(l.at({3}).to_double(), 0.5, 1e-15);
  EXPECT_EQ(linspace(Scalar(2.0), Scalar(5.0), 1).at({0}).to_double(), 2.0);
  EXPECT_EQ(linspace(Scalar(2.0), Scalar(5.0), 0).numel(), 0);
  EXPECT_THROW(linspace(Scalar(0.0), Scalar(1.0), -1), Error);
}

TEST(Creation, Eye) {
  Tensor e = eye(3, 4);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(e.at({i, j}).to_double(), i == j ? 1.0 : 0.0);
  EXPECT_EQ(eye(0).numel(), 0);
  EXPECT_THROW(eye(-1), Error);
}

TEST(Creation, RandomIsSeededAndThreadCountIndependent) {
  Generator g1(42), g2(42);
  Tensor a = rand({1000}, DType::Float32, &g1);
  Tensor b = rand({1000}, DType::Float32, &g2);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(a.at({i}).to_double(), b.at({i}).to_double());
  // The next call continues the stream instead of repeating it.
  Tensor c = rand({1000}, DType::Float32, &g1);
  EXPECT_NE(a.at({0}).to_double(), c.at({0}).to_double());
  // Same numbers with a single thread.
  set_num_threads(1);
  Generator g3(42);
  Tensor d = rand({1000}, DType::Float32, &g3);
  set_num_threads(physical_core_count());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(a.at({i}).to_double(), d.at({i}).to_double());
}

TEST(Creation, RandomDistributions) {
  Generator g(7);
  const int64_t n = 200000;
  Tensor u = rand({n}, DType::Float64, &g);
  Tensor z = randn({n}, DType::Float32, &g);
  Tensor r = randint(-3, 5, {n}, DType::Int64, &g);
  double su = 0, sz = 0, sz2 = 0;
  int64_t counts[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    double x = u.data<double>()[i];
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    su += x;
    double y = z.data<float>()[i];
    sz += y;
    sz2 += y * y;
    int64_t k = r.data<int64_t>()[i];
    ASSERT_GE(k, -3);
    ASSERT_LT(k, 5);
    ++counts[k + 3];
  }
  // Standard errors: uniform mean sd = sqrt(1/12/n) ~ 6.5e-4; normal mean 1/sqrt(n) ~ 2.2e-3;
  // variance sd ~ sqrt(2/n) ~ 3.2e-3. Allow 6 standard errors.
  EXPECT_NEAR(su / n, 0.5, 4e-3);
  EXPECT_NEAR(sz / n, 0.0, 1.4e-2);
  EXPECT_NEAR(sz2 / n, 1.0, 2e-2);
  for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c) / n, 1.0 / 8, 6 * std::sqrt(0.125 * 0.875 / n));
  EXPECT_THROW(randint(5, 5, {2}), Error);
  EXPECT_THROW(rand({2}, DType::Int32), Error);
  EXPECT_EQ(randn({3}, DType::BFloat16, &g).dtype(), DType::BFloat16);
}
