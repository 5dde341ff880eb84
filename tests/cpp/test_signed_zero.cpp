// The sign of a zero (or infinite) result of the float unary ops, which value
// comparisons cannot see (-0 == +0): PyTorch follows IEEE 754 / C's Annex F, so sin,
// tanh, expm1, log1p, sqrt, trunc, floor, ceil, round, gelu and silu give -0 for -0, abs
// and square +0, reciprocal and rsqrt -inf. The reference is the C library's long double
// function (Annex F fixes those signs). Checked on every float dtype, every SIMD target
// and sizes around the vector widths, so the zero lands both in full vectors and in the
// zero-padded tail.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "elementwise_test_util.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"

namespace kiln {
namespace {

using namespace ew_test;
using LD = long double;

struct SignCase {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<LD(LD)> ref;
};

LD phi(LD x) { return 0.5L * std::erfc(-x / std::sqrt(2.0L)); }

const std::vector<SignCase>& sign_cases() {
  static const std::vector<SignCase> cases = {
      {"sin", [](const Tensor& x) { return sin(x); }, [](LD x) { return std::sin(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](LD x) { return std::tanh(x); }},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](LD x) { return std::expm1(x); }},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](LD x) { return std::log1p(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](LD x) { return std::sqrt(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](LD x) { return 1 / std::sqrt(x); }},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](LD x) { return 1 / x; }},
      {"neg", [](const Tensor& x) { return neg(x); }, [](LD x) { return -x; }},
      {"abs", [](const Tensor& x) { return abs(x); }, [](LD x) { return std::fabs(x); }},
      {"square", [](const Tensor& x) { return square(x); }, [](LD x) { return x * x; }},
      {"trunc", [](const Tensor& x) { return trunc(x); }, [](LD x) { return std::trunc(x); }},
      {"floor", [](const Tensor& x) { return floor(x); }, [](LD x) { return std::floor(x); }},
      {"ceil", [](const Tensor& x) { return ceil(x); }, [](LD x) { return std::ceil(x); }},
      // Half to even (the default rounding mode): round(-0.5) = -0.
      {"round", [](const Tensor& x) { return round(x); }, [](LD x) { return std::nearbyint(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }, [](LD x) { return x * phi(x); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); },
       [](LD x) { return 0.5L * x * (1 + std::tanh(0.7978845608028654L * (x + 0.044715L * x * x * x))); }},
      {"silu", [](const Tensor& x) { return silu(x); }, [](LD x) { return x / (1 + std::exp(-x)); }},
  };
  return cases;
}

// Zeros of both signs among values that round to a signed zero (round, ceil, trunc) and
// ordinary ones, so that a lane's sign never depends on its neighbours.
const std::vector<double> kPattern = {-0.0, 0.0, -0.4, -0.5, 1.0, -0.0, -0.7, 0.25, -1.0, 0.0, -0.0};

std::vector<double> values_of_length(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = kPattern[static_cast<size_t>(i) % kPattern.size()];
  return v;
}

// Every element whose reference is a zero or an infinity must be that value with that
// sign; the others are the value tests' business (test_elementwise_unary.cpp).
void check_signs(const SignCase& c, DType dtype, int64_t n, Layout layout) {
  const std::vector<double> in = values_of_length(n);
  const Tensor x = make_tensor(in, dtype, layout);
  const std::vector<double> stored = to_doubles(x);
  const std::vector<double> got = to_doubles(c.op(x));
  ASSERT_EQ(got.size(), stored.size());
  int checked = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const LD ref = c.ref(static_cast<LD>(stored[i]));
    if (ref != 0 && !std::isinf(ref)) continue;
    ++checked;
    // As stored in the result dtype: float8_e4m3fn has no infinity.
    const double want = round_to(dtype, static_cast<double>(ref));
    EXPECT_TRUE(got[i] == want && std::signbit(got[i]) == std::signbit(want))
        << c.name << "(" << stored[i] << ") = " << got[i] << ", expected " << want << " at " << i;
  }
  // Every pattern starts with -0, so there is always something to check.
  EXPECT_GT(checked, 0);
}

TEST(SignedZero, UnaryOpsKeepTheSignOfZeroOnEveryFloatDType) {
  for (const SignCase& c : sign_cases()) {
    for (DType dtype : kFloatDtypes) {
      for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 33, 1000}) {
        for (Layout layout : kLayouts) {
          SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n) + " " +
                       layout_name(layout));
          check_signs(c, dtype, n, layout);
        }
      }
    }
  }
}

TEST(SignedZero, UnaryOpsKeepTheSignOfZeroOnEachSimdTarget) {
  for_each_simd_target([] {
    for (const SignCase& c : sign_cases()) {
      for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
        for (int64_t n : {1, 3, 4, 5, 8, 9, 16, 17, 33}) {
          SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
          check_signs(c, dtype, n, Layout::Contiguous);
        }
      }
    }
  });
}

// The large-argument path (|x| > 39000 goes to the C library) next to zeros in one vector.
TEST(SignedZero, SinOfZeroNextToLargeArguments) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = make_tensor({-0.0, 1e6, 0.0, -3e38, -0.0, 5e4, -0.0, 0.0, 1e30}, dtype);
    const std::vector<double> got = to_doubles(sin(x));
    for (size_t i : {size_t{0}, size_t{4}, size_t{6}}) EXPECT_TRUE(got[i] == 0 && std::signbit(got[i])) << i;
    for (size_t i : {size_t{2}, size_t{7}}) EXPECT_TRUE(got[i] == 0 && !std::signbit(got[i])) << i;
  }
}

// Not a sign but the same family of exact values: cos of a zero, or of anything below
// 2^-12 (float32) / 2^-27 (float64), is exactly 1 (x^2 / 2 is under half an ulp of 1).
TEST(SignedZero, CosNearZeroIsExactlyOne) {
  for_each_simd_target([] {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      const double below = dtype == DType::Float32 ? std::ldexp(0.999, -12) : std::ldexp(0.999, -27);
      const Tensor x = make_tensor({0.0, -0.0, 1e-30, -1e-30, below, -below, 0.0, 1e-40, -0.0}, dtype);
      for (double c : to_doubles(cos(x))) EXPECT_EQ(c, 1.0) << dtype_name(dtype);
    }
  });
}

}  // namespace
}  // namespace kiln
