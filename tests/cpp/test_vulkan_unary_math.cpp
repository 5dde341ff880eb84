// The transcendental unary ops of the Vulkan elementwise kernel (shaders/unary_math.glsl:
// exp2, sin, cos, tanh, gelu exact and tanh, softplus) against the CPU kernels, which
// test_elementwise_unary.cpp holds to scalar references, on every float storage dtype,
// contiguous and transposed.
//
// Tolerances, from Vulkan's precision rules (exp 3 + 2|x| ulp, exp2 3 + 2|x| ulp, +-*
// exact to rounding, / 2.5 ulp) and the formulas' own error, plus one unit of a narrower
// result dtype:
//   exp2: |r| <= 1/2 gives 4 ulp, times an exact power of two;
//   sin/cos: the reduction is within 2^-25 absolute, the polynomials within about 2 ulp,
//     so 4 ulp relative plus 2^-24 absolute (values near a zero of the function); huge
//     arguments: below;
//   tanh: exp(2|x|) with |x| <= 4 (19 ulp) damped by 2 / (e + 1) <= 0.8 of the result,
//     plus the division and subtraction: 24 ulp;
//   gelu: exp(-x^2 / 2) for |x| <= 4 (3 + 16 ulp) and the Chebyshev fit, divisions and
//     products: 32 ulp; gelu tanh: sigmoid's exp of |2u| <= 13 for |x| <= 4 (29 ulp) and a
//     division: 36 ulp;
//   softplus: exp(beta x) with |beta x| <= 8 (19 ulp) carried relatively through log1p,
//     log1p's own 4 ulp, the division by beta: 28 ulp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "elementwise_test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::expect_same_bits;
using testing::storage_eps;
using testing::uniform;
using VulkanUnaryMath = testing::VulkanTest;

Tensor tensor(const std::vector<double>& values) { return ew_test::make_tensor(values, DType::Float32); }

constexpr double kEps32 = std::numeric_limits<float>::epsilon();

struct Case {
  const char* name;
  Tensor (*fn)(const Tensor&);
  double lo, hi;
  double ulps;
  double atol;
};

const Case kCases[] = {
    {"exp2", [](const Tensor& x) { return exp2(x); }, -20, 20, 4, 0},
    {"sin", [](const Tensor& x) { return sin(x); }, -10, 10, 4, std::ldexp(1.0, -24)},
    {"cos", [](const Tensor& x) { return cos(x); }, -10, 10, 4, std::ldexp(1.0, -24)},
    {"tanh", [](const Tensor& x) { return tanh(x); }, -4, 4, 24, 0},
    {"gelu", [](const Tensor& x) { return gelu(x); }, -4, 4, 32, 0},
    {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, -4, 4, 36, 0},
    {"softplus", [](const Tensor& x) { return softplus(x); }, -8, 8, 28, 0},
    {"softplus_beta2", [](const Tensor& x) { return softplus(x, Scalar(2.0), Scalar(5.0)); }, -4, 4, 28, 0},
};

TEST_F(VulkanUnaryMath, MatchCpuOnEveryFloatDTypeContiguousAndStrided) {
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dt)));
      // 7 x 131: not a multiple of any work-group or SIMD width; transposed for strides.
      const Tensor x = uniform({7, 131}, c.lo, c.hi, 31, dt);
      const double rtol = c.ulps * kEps32 + storage_eps(dt);
      const double atol = c.atol + (dt == DType::Float32 ? 0 : c.atol * 2);
      expect_close(c.fn(x.to(kVulkan)), c.fn(x), rtol, atol);
      expect_close(c.fn(x.to(kVulkan).t()), c.fn(x.t()), rtol, atol);
    }
  }
}

TEST_F(VulkanUnaryMath, SpecialValuesMatchCpu) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = tensor({0.0, -0.0, inf, -inf, nan, 1.0, -1.0, 30.0, -30.0, 127.0, -126.0, 200.0, -200.0});
  for (const Case& c : kCases) {
    if (std::string(c.name) == "gelu") continue;  // gelu(-inf): below
    SCOPED_TRACE(c.name);
    expect_close(c.fn(x.to(kVulkan)), c.fn(x), c.ulps * kEps32, c.atol);
  }
  // Exact where the CPU is exact: integer powers of two, the signed zeros of sin, tanh and gelu.
  const Tensor ints = tensor({-126.0, -10.0, -1.0, 0.0, 1.0, 7.0, 64.0, 127.0});
  expect_same_bits(exp2(ints.to(kVulkan)), exp2(ints));
  const Tensor zeros_ = tensor({0.0, -0.0});
  expect_same_bits(sin(zeros_.to(kVulkan)), sin(zeros_));
  expect_same_bits(tanh(zeros_.to(kVulkan)), tanh(zeros_));
  expect_same_bits(gelu(zeros_.to(kVulkan)), gelu(zeros_));
  const Tensor g = tensor({inf, nan, 20.0, -20.0});
  expect_close(gelu(g.to(kVulkan)), gelu(g), 32 * kEps32, 0);
}

// Below |x| = 2^24 the Cody-Waite reduction is within about 2^-24 absolute, so sin and
// cos of large arguments (RoPE angles reach position x frequency) stay within 2^-22
// absolute of the CPU's (the polynomial's ulp and the reduction together).
TEST_F(VulkanUnaryMath, SinCosOfModerateArgumentsMatchCpu) {
  for (double bound : {1e3, 4e4, 1e6, 1.67e7}) {
    SCOPED_TRACE("bound " + std::to_string(bound));
    const Tensor x = uniform({4099}, -bound, bound, 32);
    expect_close(sin(x.to(kVulkan)), sin(x), 0, std::ldexp(1.0, -22));
    expect_close(cos(x.to(kVulkan)), cos(x), 0, std::ldexp(1.0, -22));
  }
}

// From |x| = 2^24 to the largest float the reduction is Payne-Hanek's: r within 0.5 ulp
// plus 2^-30 relative, the polynomials within about 1 ulp, and the CPU (the C library
// there) within 1 ulp, so 4 ulp relative and no absolute term: the reduction is exact
// even where the result is small. Every binade from 2^24 to 2^127, both signs, the
// largest float, and the floats nearest a multiple of pi/2 (29 leading zero bits in the
// reduced fraction, found by an exhaustive search over the floats above 2^24).
TEST_F(VulkanUnaryMath, SinCosOfHugeArgumentsMatchCpu) {
  std::vector<double> values;
  for (int e = 24; e <= 127; ++e) {
    const Tensor mantissas = uniform({40}, 1.0, 2.0, 100 + e);
    for (double m : ew_test::to_doubles(mantissas)) {
      values.push_back(std::ldexp(m, e));
      values.push_back(-std::ldexp(m, e));
    }
    values.push_back(std::ldexp(1.0, e));
  }
  for (double v : {3.4028234663852886e38, -3.4028234663852886e38, 2.19993846e10, 7.72917892e28, 4.39987692e10,
                   1.54583578e29, 16777216.0, -16777216.0, 16777218.0, 2.6353589e7, 1e9, 3e38}) {
    values.push_back(v);
  }
  const Tensor x = tensor(values);
  expect_close(sin(x.to(kVulkan)), sin(x), 4 * kEps32, 0);
  expect_close(cos(x.to(kVulkan)), cos(x), 4 * kEps32, 0);
  // The narrow dtypes whose range reaches there (bfloat16 up to 3.4e38).
  const Tensor xb = x.to(DType::BFloat16);
  expect_close(sin(xb.to(kVulkan)), sin(xb), 4 * kEps32 + storage_eps(DType::BFloat16), 0);
  expect_close(cos(xb.to(kVulkan)), cos(xb), 4 * kEps32 + storage_eps(DType::BFloat16), 0);
  // inf and NaN give NaN, as on the CPU.
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor specials = tensor({inf, -inf, std::numeric_limits<double>::quiet_NaN()});
  expect_close(sin(specials.to(kVulkan)), sin(specials), 0, 0);
  expect_close(cos(specials.to(kVulkan)), cos(specials), 0, 0);
}

}  // namespace
}  // namespace kiln
