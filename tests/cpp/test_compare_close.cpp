// isclose, allclose, equal, any and all against plain scalar references: PyTorch's
// closeness rule |a - b| <= atol + rtol * |b| with inf == inf and equal_nan, the
// same-dtype requirement, integer and bool inputs computed in float32, broadcasting,
// and empty inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/compare.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"

using namespace kiln;

namespace {

using kiln::testing::expect_error;

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Tensor f64(const std::vector<double>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::Float64);
  std::copy(v.begin(), v.end(), t.data<double>());
  return t;
}

std::vector<bool> bools_of(const Tensor& t) {
  std::vector<bool> out;
  const Tensor c = t.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) out.push_back(c.data<bool>()[i]);
  return out;
}

// The scalar reference, in double.
bool close_ref(double a, double b, double rtol, double atol, bool equal_nan) {
  if (a == b) return true;
  if (equal_nan && std::isnan(a) && std::isnan(b)) return true;
  const double err = std::fabs(a - b);
  return std::isfinite(err) && err <= atol + rtol * std::fabs(b);
}

}  // namespace

TEST(IsClose, MatchesTheScalarRuleOnEdgeValues) {
  const std::vector<double> a = {1.0, 1.0, 1.0 + 1e-6, 1.0 + 1e-4, kInf, kInf, -kInf, kNan, kNan, 0.0, 1e-9, 100.0};
  const std::vector<double> b = {1.0, 1.0 + 1e-5, 1.0, 1.0, kInf, -kInf, 1.0, kNan, 1.0, 1e-8, 0.0, 100.001};
  for (bool equal_nan : {false, true}) {
    for (auto [rtol, atol] : std::vector<std::pair<double, double>>{{1e-5, 1e-8}, {0.0, 0.0}, {0.0, 1e-3}, {1e-3, 0.0}}) {
      const std::vector<bool> got = bools_of(isclose(f64(a), f64(b), rtol, atol, equal_nan));
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(got[i], close_ref(a[i], b[i], rtol, atol, equal_nan))
            << a[i] << " vs " << b[i] << " rtol " << rtol << " atol " << atol << " equal_nan " << equal_nan;
      }
    }
  }
}

TEST(IsClose, DtypesBroadcastAndLayouts) {
  // float32 computes in float32: 1 + 2^-23 is within rtol of 1.
  const Tensor one = ones({3});
  EXPECT_TRUE(allclose(add(one, Scalar(1.2e-7)), one));
  // Integers compute in float32, so uint8 3 vs 5 is a difference of 2, not a wrap.
  const Tensor u3 = full({1}, Scalar(int64_t{3}), DType::UInt8), u5 = full({1}, Scalar(int64_t{5}), DType::UInt8);
  EXPECT_FALSE(isclose(u3, u5, 0.0, 1.0).item().to_bool());
  EXPECT_TRUE(isclose(u3, u5, 0.0, 2.0).item().to_bool());
  // rtol scales |other|: |5 - 3| = 2 against 0.5 * 3 and 0.7 * 3.
  EXPECT_FALSE(isclose(u5, u3, 0.5, 0.0).item().to_bool());
  EXPECT_TRUE(isclose(u5, u3, 0.7, 0.0).item().to_bool());
  // bool: equal values only, unless the tolerance reaches 1.
  const Tensor t = full({1}, Scalar(true)), f = full({1}, Scalar(false));
  EXPECT_FALSE(isclose(t, f).item().to_bool());
  EXPECT_TRUE(isclose(t, f, 0.0, 1.0).item().to_bool());
  // Broadcasting [3, 1] with [4] to [3, 4]; a transposed operand.
  const Tensor col = arange(Scalar(3.0)).view({3, 1});
  const Tensor row = arange(Scalar(4.0));
  const Tensor c = isclose(col, row);
  ASSERT_EQ(c.sizes(), (Shape{3, 4}));
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(c.at({i, j}).to_bool(), i == j);
  }
  const Tensor m = arange(Scalar(6.0)).view({2, 3});
  EXPECT_TRUE(equal(isclose(m.t().contiguous(), m.t()), ones({3, 2}, DType::Bool)));
  // float16 and bfloat16: the tolerance is rounded to the dtype, as PyTorch.
  const Tensor h = ones({2}, DType::Float16);
  EXPECT_TRUE(allclose(h, h));
  EXPECT_FALSE(allclose(add(h, Scalar(0.01)), h));
  EXPECT_TRUE(allclose(add(h, Scalar(0.01)), h, 0.02));
  // Complex: |a - b| against atol + rtol * |b|; NaN in either part with equal_nan.
  const Tensor z = full({1}, Scalar(std::complex<double>(3.0, 4.0)), DType::Complex128);
  const Tensor z2 = full({1}, Scalar(std::complex<double>(3.0, 4.05)), DType::Complex128);
  EXPECT_FALSE(allclose(z, z2));
  EXPECT_TRUE(allclose(z, z2, 0.011));  // |diff| 0.05 <= 0.011 * 5
  const Tensor zn = full({1}, Scalar(std::complex<double>(kNan, 1.0)), DType::Complex128);
  EXPECT_FALSE(allclose(zn, zn));
  EXPECT_TRUE(allclose(zn, zn, 1e-5, 1e-8, true));
  // Empty tensors are all close.
  EXPECT_TRUE(allclose(zeros({0, 3}), zeros({0, 3})));
  EXPECT_EQ(isclose(zeros({0}), zeros({0})).numel(), 0);
}

TEST(IsClose, Errors) {
  expect_error([] { isclose(ones({2}), ones({2}, DType::Float64)); }, ErrorKind::Runtime,
               "Float did not match Double");
  expect_error([] { allclose(ones({2}, DType::Int64), ones({2})); }, ErrorKind::Runtime,
               "Long did not match Float");
  expect_error([] { isclose(ones({2}), ones({2}), -1.0); }, ErrorKind::Runtime,
               "rtol must be greater than or equal to zero, but got -1");
  expect_error([] { isclose(ones({2}), ones({2}), 1e-5, -0.5); }, ErrorKind::Runtime,
               "atol must be greater than or equal to zero, but got -0.5");
  expect_error([] { isclose(ones({2}), ones({3})); }, ErrorKind::Runtime, "");
}

TEST(Equal, SizesPromotionAndNan) {
  const Tensor a = arange(Scalar(6.0)).view({2, 3});
  EXPECT_TRUE(equal(a, a.clone()));
  EXPECT_TRUE(equal(a.t(), a.t().contiguous()));
  EXPECT_TRUE(equal(a, a.to(DType::Int64)));  // compared after promotion
  EXPECT_FALSE(equal(a, a.view({3, 2})));     // sizes differ: no broadcasting
  EXPECT_FALSE(equal(a, ones({1, 3})));
  EXPECT_FALSE(equal(f64({1.0, kNan}), f64({1.0, kNan})));
  EXPECT_TRUE(equal(zeros({0}), zeros({0}, DType::Int8)));
  EXPECT_FALSE(equal(zeros({0}), zeros({0, 1})));
  EXPECT_TRUE(equal(scalar_tensor(Scalar(2.0)), scalar_tensor(Scalar(int64_t{2}))));
}

TEST(AnyAll, MatchReferenceWithDimsAndEmpty) {
  Tensor x = zeros({2, 3}, DType::Float32);
  Tensor row = x.select(0, 1);
  row.fill_(Scalar(1.0));
  // x = [[0, 0, 0], [1, 1, 1]]
  EXPECT_TRUE(any(x).item().to_bool());
  EXPECT_FALSE(all(x).item().to_bool());
  EXPECT_EQ(bools_of(any(x, {1})), (std::vector<bool>{false, true}));
  EXPECT_EQ(bools_of(all(x, {1})), (std::vector<bool>{false, true}));
  EXPECT_EQ(bools_of(all(x, {0})), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(any(x, {1}, true).sizes(), (Shape{2, 1}));
  EXPECT_EQ(any(x).dtype(), DType::Bool);
  // NaN is nonzero; uint8 keeps uint8 (PyTorch); empty reductions give false / true.
  EXPECT_TRUE(all(f64({kNan, 1.0})).item().to_bool());
  EXPECT_EQ(any(ones({2}, DType::UInt8)).dtype(), DType::UInt8);
  EXPECT_FALSE(any(zeros({0})).item().to_bool());
  EXPECT_TRUE(all(zeros({0})).item().to_bool());
  EXPECT_EQ(bools_of(all(zeros({2, 0}), {1})), (std::vector<bool>{true, true}));
  // Complex and bool inputs; a 0-dim input.
  EXPECT_TRUE(any(full({2}, Scalar(std::complex<double>(0.0, 1.0)), DType::Complex64)).item().to_bool());
  EXPECT_FALSE(all(full({2}, Scalar(false))).item().to_bool());
  EXPECT_TRUE(all(scalar_tensor(Scalar(3))).item().to_bool());
}
