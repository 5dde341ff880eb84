// Unary elementwise ops against a long double scalar reference, over every dtype they
// take, the size sweep, strided and transposed inputs, each SIMD target, the IEEE
// special values, and every error path.
//
// Tolerances: close_to() accepts (budget * compute_eps + unit_roundoff(out)) * |ref|
// + min_normal(out) (see elementwise_test_util.h). Each budget below is the kernel's
// error bound in ulps of its compute dtype (2^-23 relative for f32 compute, 2^-52 for
// f64), derived next to it; narrow outputs add their own final rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "elementwise_test_util.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;

using namespace ew_test;
using LD = long double;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const LD kPi = 3.141592653589793238462643383279502884L;

struct FloatUnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<LD(LD)> ref;
  std::function<double(double)> budget;  // ulps of the compute dtype, may depend on x
  double lo, hi;                         // random inputs
  std::vector<double> specials;          // always included first
};

std::function<double(double)> fixed(double ulps) {
  return [ulps](double) { return ulps; };
}

// PyTorch's 0.5 x (1 + tanh(u)) in the identical form x / (1 + e^(-2u)), which does not
// cancel in long double either for very negative x.
LD gelu_tanh_ref(LD x) {
  const LD u = std::sqrt(2 / kPi) * (x + LD(0.044715) * x * x * x);
  return x / (1 + std::exp(-2 * u));
}

LD softplus_ref(LD x, LD beta, LD threshold) {
  return x * beta > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}

const std::vector<double> kCommonSpecials = {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 1e-40, -1e-40, 3e38, -3e38};

std::vector<FloatUnaryCase> float_unary_cases() {
  std::vector<FloatUnaryCase> cases;
  auto add = [&](std::string name, std::function<Tensor(const Tensor&)> op, std::function<LD(LD)> ref,
                 std::function<double(double)> budget, double lo, double hi, std::vector<double> extra = {}) {
    std::vector<double> specials = kCommonSpecials;
    specials.insert(specials.end(), extra.begin(), extra.end());
    cases.push_back({std::move(name), std::move(op), std::move(ref), std::move(budget), lo, hi, specials});
  };
  // Exact (one correctly rounded IEEE operation or none): 0.5 ulp, or 0 for exact results.
  add("abs", [](const Tensor& x) { return abs(x); }, [](LD x) { return std::fabs(x); }, fixed(0), -100, 100);
  add("neg", [](const Tensor& x) { return neg(x); }, [](LD x) { return -x; }, fixed(0), -100, 100);
  add("sign", [](const Tensor& x) { return sign(x); },
      [](LD x) { return std::isnan(x) ? LD(0) : LD((0 < x) - (x < 0)); }, fixed(0), -3, 3);
  add("square", [](const Tensor& x) { return square(x); }, [](LD x) { return x * x; }, fixed(0.5), -100, 100);
  add("sqrt", [](const Tensor& x) { return sqrt(x); }, [](LD x) { return std::sqrt(x); }, fixed(0.5), 0, 1e6);
  add("reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](LD x) { return 1 / x; }, fixed(0.5), -10, 10);
  // 1 / sqrt(x): two roundings of 2^-24 each -> 1 ulp.
  add("rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](LD x) { return 1 / std::sqrt(x); }, fixed(1), 0, 1e6);
  add("relu", [](const Tensor& x) { return relu(x); }, [](LD x) { return x < 0 ? LD(0) : x; }, fixed(0), -10, 10);
  add("floor", [](const Tensor& x) { return floor(x); }, [](LD x) { return std::floor(x); }, fixed(0), -100, 100,
      {0.5, -0.5, 2.5, -2.5, 0.49999997, 8388607.5, -8388607.5, 1e300});
  add("ceil", [](const Tensor& x) { return ceil(x); }, [](LD x) { return std::ceil(x); }, fixed(0), -100, 100,
      {0.5, -0.5, 2.5, -2.5, 0.49999997, 8388607.5, -8388607.5});
  add("round", [](const Tensor& x) { return round(x); }, [](LD x) { return std::nearbyint(x); }, fixed(0), -100,
      100, {0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, 8388607.5, 4503599627370495.5});
  add("trunc", [](const Tensor& x) { return trunc(x); }, [](LD x) { return std::trunc(x); }, fixed(0), -100, 100,
      {0.5, -0.5, 2.5, -2.5, 0.49999997, 8388607.5});
  // Highway's Exp: 1 ulp (hwy/contrib/math/math-inl.h), over its whole valid range.
  add("exp", [](const Tensor& x) { return exp(x); }, [](LD x) { return std::exp(x); }, fixed(1), -110, 95,
      {88.72, 88.73, 709.7, 709.8, -87.5, -103.9, -745.0});
  // 2^n * Exp(r ln 2), |r| <= 1/2: Exp's 1 ulp plus the rounding of r * ln2 (and of ln2),
  // each < 0.2 ulp after multiplying by |r ln2| <= 0.35.
  add("exp2", [](const Tensor& x) { return exp2(x); }, [](LD x) { return std::exp2(x); }, fixed(1.5), -155, 130,
      {3.0, -3.0, 127.0, 128.0, -126.0, -149.0, 1023.0, -1074.0, 0.5});
  // Highway's Expm1: 4 ulp.
  add("expm1", [](const Tensor& x) { return expm1(x); }, [](LD x) { return std::expm1(x); }, fixed(4), -20, 20,
      {1e-8, -1e-8, 88.72, -110.0});
  // Highway's Log: 4 ulp on positive finite input (subnormals included).
  add("log", [](const Tensor& x) { return log(x); }, [](LD x) { return std::log(x); }, fixed(4), 0, 1000,
      {2.0, 0.5, 1e-45, 1e-310, 1.0000001});
  // e + Log(m) * log2(e): Log's 4 ulp on |log2 m| <= 1/2, plus the product, the
  // rounding of log2(e) and the final add, 0.5 ulp each -> 5.5.
  add("log2", [](const Tensor& x) { return log2(x); }, [](LD x) { return std::log2(x); }, fixed(5.5), 0, 1000,
      {2.0, 0.5, 1024.0, 0.125, 1e-45, 1e-310, 1.4142135});
  // Highway's Log1p: 2 ulp on x >= 0; on (-1, 0) it is the same formula (log(1+x) *
  // x / ((1+x) - 1)) with one more rounding in 1 + x, so 3.
  add("log1p", [](const Tensor& x) { return log1p(x); }, [](LD x) { return std::log1p(x); }, fixed(3), -1, 100,
      {-0.999999, 1e-10, -1e-10, -1.5});
  // Highway's Sin/Cos: 3 ulp for |x| <= 39000; beyond, the C library (< 1 ulp).
  add("sin", [](const Tensor& x) { return sin(x); }, [](LD x) { return std::sin(x); }, fixed(3), -200, 200,
      {3.14159265358979, 6.28318530717959, 38999.0, 39001.0, 1e6, 1e20});
  add("cos", [](const Tensor& x) { return cos(x); }, [](LD x) { return std::cos(x); }, fixed(3), -200, 200,
      {1.5707963267949, 38999.0, 39001.0, 1e6, 1e20});
  // Highway's Tanh: 4 ulp.
  add("tanh", [](const Tensor& x) { return tanh(x); }, [](LD x) { return std::tanh(x); }, fixed(4), -12, 12,
      {1e-8, -1e-8, 18.0, 25.0, -25.0});
  // E / (1 + E) or 1 / (1 + E) with E = Exp(-|x|) <= 1: Exp's 1 ulp (in the numerator,
  // and damped by E/(1+E) <= 1/2 in the sum), the add and the division (0.5 each) ->
  // 2.5. Unlike PyTorch's 1 / (1 + e^-x), no overflow below x = -88.7.
  add("sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](LD x) { return 1 / (1 + std::exp(-x)); },
      fixed(2.5), -100, 40, {-88.0, -89.0, -100.0, 17.0});
  // x * sigmoid(x): one more product -> 3.
  add("silu", [](const Tensor& x) { return silu(x); }, [](LD x) { return x / (1 + std::exp(-x)); }, fixed(3),
      -100, 40, {-88.0, -89.0});
  // x * Phi(x) with Phi from erfc(z) = t Q(y) exp(-z^2): the fit error (1.7e-9 < 0.02
  // ulp), Q's Horner evaluation (sum |coef| = 1.03: ~1 ulp), t and y (1 ulp through
  // z = |x|/sqrt(2) and the division), Exp (1 ulp), 1 - lo/2 and four products (0.5
  // each), and 1 - tail for x > 0 (0.5) -> 6.
  add("gelu", [](const Tensor& x) { return gelu(x); },
      [](LD x) { return x * LD(0.5) * std::erfc(-x / std::sqrt(LD(2))); }, fixed(6), -16, 12,
      {-13.5, -14.2, -37.0, 1e-20});
  // x * sigmoid(2u), 2u = 2 sqrt(2/pi) (x + 0.044715 x^3), with u = eps/2 the unit
  // roundoff: x^2 and 0.044715 x^2 round twice, on the x^3 term which is at most all of
  // the inner sum, and the fused multiply-add once: <= 3u on the inner sum; the constant
  // 2 sqrt(2/pi) and the product add 2u: 5u = 2.5 eps relative on 2u. That moves the
  // result by |2u| * (1 - sigmoid(2u)) <= |2u| times it: 2.5 |2u| ulp; sigmoid and the
  // product add 3 (as silu). (The reference uses the same double 0.044715.)
  add("gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, gelu_tanh_ref,
      [](double x) {
        const double two_u = 1.5957691216057308 * (x + 0.044715 * x * x * x);
        return 2.5 * std::fabs(two_u) + 3;
      },
      -12, 12, {-20.0, 20.0});
  // log1p(Exp(y)) / beta with y = beta * x exact (beta = 1): Exp's 1 ulp passes through
  // log1p with a factor e/((1+e) log1p(e)) <= 1; Log1p's 2 ulp; the division 0.5 -> 3.5.
  add("softplus", [](const Tensor& x) { return softplus(x); },
      [](LD x) { return softplus_ref(x, 1, 20); }, fixed(3.5), -100, 40, {20.0, 20.000002, 19.99999});
  return cases;
}

// Checks op(x) against the reference for one dtype, size and layout.
void check_float_case(const FloatUnaryCase& c, DType dtype, int64_t n, Layout layout) {
  const std::vector<double> values = random_values(n, c.lo, c.hi, 17 + static_cast<uint64_t>(n), c.specials);
  const Tensor x = make_tensor(values, dtype, layout);
  const Tensor out = c.op(x);
  ASSERT_EQ(out.dtype(), dtype);
  ASSERT_EQ(out.sizes(), x.sizes());
  const std::vector<double> in = to_doubles(x);  // the stored (rounded) inputs
  const std::vector<double> got = to_doubles(out);
  int failures = 0;
  for (size_t i = 0; i < in.size() && failures < 5; ++i) {
    const auto ok = close_to(got[i], c.ref(in[i]), dtype, c.budget(in[i]));
    if (!ok) {
      ++failures;
      ADD_FAILURE() << c.name << "(" << in[i] << ") on " << dtype_name(dtype) << ": " << ok.message();
    }
  }
}

TEST(ElementwiseUnary, FloatOpsMatchReferenceForAllDtypesSizesAndLayouts) {
  for (const auto& c : float_unary_cases()) {
    for (DType dtype : kFloatDtypes) {
      for (int64_t n : kSizes) {
        for (Layout layout : kLayouts) {
          // The long array checks chunking and threads; its layout adds nothing new.
          if (n > 1000 && layout != Layout::Contiguous) continue;
          SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n) + " " +
                       layout_name(layout));
          check_float_case(c, dtype, n, layout);
        }
      }
    }
  }
}

TEST(ElementwiseUnary, FloatOpsMatchReferenceOnEachSimdTarget) {
  for_each_simd_target([] {
    for (const auto& c : float_unary_cases()) {
      for (DType dtype : {DType::Float32, DType::Float64}) {
        for (int64_t n : kTargetSizes) {
          SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
          check_float_case(c, dtype, n, Layout::Contiguous);
        }
      }
    }
  });
}

TEST(ElementwiseUnary, BroadcastInputIsReadOncePerElement) {
  // A stride-0 input: every output element sees the same value.
  const Tensor x = make_tensor({0.75}, DType::Float32).expand({5, 7});
  const std::vector<double> got = to_doubles(exp(x));
  for (double g : got) EXPECT_TRUE(close_to(g, std::exp(0.75), DType::Float32, 1));
  EXPECT_EQ(exp(x).sizes(), (Shape{5, 7}));
}

TEST(ElementwiseUnary, ZeroDimAndEmptyShapes) {
  const Tensor s = make_tensor({4.0}, DType::Float32).view({});
  const Tensor r = sqrt(s);
  EXPECT_EQ(r.dim(), 0);
  EXPECT_EQ(r.item().to_double(), 2.0);
  const Tensor e = exp(zeros({3, 0, 2}));
  EXPECT_EQ(e.sizes(), (Shape{3, 0, 2}));
}

// Float-valued functions promote integer and bool inputs to float32.
TEST(ElementwiseUnary, IntegerAndBoolInputsGiveFloat32) {
  const std::vector<int64_t> ints = {-7, -1, 0, 1, 2, 5, 100};
  const std::vector<std::pair<std::function<Tensor(const Tensor&)>, std::function<LD(LD)>>> ops = {
      {[](const Tensor& x) { return exp(x); }, [](LD x) { return std::exp(x); }},
      {[](const Tensor& x) { return sqrt(x); }, [](LD x) { return std::sqrt(x); }},
      {[](const Tensor& x) { return sigmoid(x); }, [](LD x) { return 1 / (1 + std::exp(-x)); }},
      {[](const Tensor& x) { return reciprocal(x); }, [](LD x) { return 1 / x; }},
      {[](const Tensor& x) { return log2(x); }, [](LD x) { return std::log2(x); }},
  };
  for (DType dtype : {DType::Int32, DType::Int64, DType::Int8, DType::UInt8, DType::Bool}) {
    std::vector<int64_t> v = ints;
    if (dtype == DType::UInt8 || dtype == DType::Bool) v = {0, 1, 2, 5, 100};
    const Tensor x = make_int_tensor(v, dtype);
    const std::vector<double> in = to_doubles(x);
    for (const auto& [op, ref] : ops) {
      const Tensor out = op(x);
      ASSERT_EQ(out.dtype(), DType::Float32) << dtype_name(dtype);
      const std::vector<double> got = to_doubles(out);
      // Integers up to 100 are exact in float32; the budget is the largest of the
      // float32 budgets above (log2: 5.5 ulp).
      for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(close_to(got[i], ref(in[i]), DType::Float32, 5.5));
    }
  }
}

// Results pinned by value where the sign of zero or the exact value matters.
TEST(ElementwiseUnary, SpecialValuesPinned) {
  auto one = [](const Tensor& t) { return t.item().to_double(); };
  auto f32 = [](double v) { return make_tensor({v}, DType::Float32).view({}); };
  EXPECT_EQ(one(sign(f32(kNaN))), 0.0);  // PyTorch: (0 < x) - (x < 0)
  EXPECT_FALSE(std::signbit(one(sign(f32(-0.0)))));
  EXPECT_TRUE(std::signbit(one(neg(f32(0.0)))));
  EXPECT_FALSE(std::signbit(one(abs(f32(-0.0)))));
  EXPECT_TRUE(std::signbit(one(sqrt(f32(-0.0)))));
  EXPECT_EQ(one(rsqrt(f32(-0.0))), -kInf);
  EXPECT_EQ(one(rsqrt(f32(0.0))), kInf);
  EXPECT_TRUE(std::isnan(one(rsqrt(f32(-1.0)))));
  EXPECT_EQ(one(log(f32(0.0))), -kInf);
  EXPECT_EQ(one(log(f32(-0.0))), -kInf);
  EXPECT_TRUE(std::isnan(one(log(f32(-1.0)))));
  EXPECT_EQ(one(log2(f32(8.0))), 3.0);
  EXPECT_EQ(one(log2(f32(std::ldexp(1.0, -140)))), -140.0);
  EXPECT_EQ(one(exp2(f32(-3.0))), 0.125);
  EXPECT_EQ(one(exp2(f32(-149.0))), std::ldexp(1.0, -149));
  EXPECT_EQ(one(exp(f32(-kInf))), 0.0);
  EXPECT_EQ(one(exp(f32(kInf))), kInf);
  EXPECT_EQ(one(exp(f32(88.8))), kInf);
  EXPECT_TRUE(std::signbit(one(expm1(f32(-0.0)))));
  EXPECT_EQ(one(expm1(f32(-kInf))), -1.0);
  EXPECT_TRUE(std::signbit(one(log1p(f32(-0.0)))));
  EXPECT_EQ(one(log1p(f32(-1.0))), -kInf);
  EXPECT_TRUE(std::signbit(one(tanh(f32(-0.0)))));
  EXPECT_EQ(one(tanh(f32(-kInf))), -1.0);
  EXPECT_EQ(one(sigmoid(f32(-kInf))), 0.0);
  EXPECT_EQ(one(sigmoid(f32(kInf))), 1.0);
  EXPECT_TRUE(std::isnan(one(silu(f32(-kInf)))));  // -inf / inf, as PyTorch
  EXPECT_TRUE(std::isnan(one(gelu(f32(-kInf)))));  // -inf * 0, as PyTorch
  EXPECT_EQ(one(gelu(f32(kInf))), kInf);
  EXPECT_TRUE(std::signbit(one(gelu(f32(-0.0)))));
  EXPECT_EQ(one(softplus(f32(kInf))), kInf);
  EXPECT_EQ(one(softplus(f32(-kInf))), 0.0);
  EXPECT_EQ(one(floor(f32(-0.5))), -1.0);
  EXPECT_TRUE(std::signbit(one(floor(f32(-0.0)))));
  EXPECT_TRUE(std::signbit(one(ceil(f32(-0.5)))));
  EXPECT_FALSE(std::signbit(one(ceil(f32(0.0)))));
  EXPECT_EQ(one(round(f32(2.5))), 2.0);
  EXPECT_EQ(one(round(f32(0.49999997))), 0.0);
  EXPECT_TRUE(std::signbit(one(round(f32(-0.5)))));
  EXPECT_TRUE(std::signbit(one(trunc(f32(-0.7)))));
  EXPECT_TRUE(std::isnan(one(relu(f32(kNaN)))));
  // gelu against known values: Phi(1) = 0.841344746068542948585...
  EXPECT_NEAR(one(gelu(make_tensor({1.0}, DType::Float64).view({}))), 0.8413447460685429, 4e-16);
  EXPECT_NEAR(one(gelu(make_tensor({-1.0}, DType::Float64).view({}))), -0.15865525393145707, 4e-16);
}

// softplus with beta != 1 and a smaller threshold; beta = 2 keeps beta * x exact.
TEST(ElementwiseUnary, SoftplusBetaThreshold) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16}) {
    const std::vector<double> v = random_values(1000, -30, 30, 5, {5.0, 4.9999995, 5.0000005});
    const Tensor x = make_tensor(v, dtype, Layout::Strided);
    const std::vector<double> in = to_doubles(x);
    const std::vector<double> got = to_doubles(softplus(x, 2.0, 10.0));
    // As softplus above (3.5 ulp); the division by beta = 2 is exact.
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_TRUE(close_to(got[i], softplus_ref(in[i], 2, 10), dtype, 3.5)) << in[i];
    }
  }
}

// ---------------------------------------------------------------- integers

template <typename F>
void check_integer_unary(const char* name, F op, std::function<int64_t(int64_t)> ref, bool with_unsigned) {
  for (DType dtype : kIntDtypes) {
    if (is_unsigned(dtype) && !with_unsigned) continue;
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{100003}}) {
      SCOPED_TRACE(std::string(name) + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      // The extremes of every width (they wrap into range), then a spread of values.
      std::vector<int64_t> v = {0, 1, -1, 127, -128, 255, 32767, -32768, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
      v.resize(static_cast<size_t>(n));
      for (int64_t i = 12; i < n; ++i) v[static_cast<size_t>(i)] = (i * 2654435761LL) % 2001 - 1000;
      const Tensor x = make_int_tensor(v, dtype);
      const Tensor out = op(x);
      ASSERT_EQ(out.dtype(), dtype);
      const std::vector<int64_t> in = to_int64s(x);
      std::vector<int64_t> want(in.size());
      for (size_t i = 0; i < in.size(); ++i) want[i] = ref(in[i]);
      // Integer results are exact: wrap the int64 reference into the dtype and compare.
      EXPECT_EQ(to_int64s(out), to_int64s(make_int_tensor(want, dtype)));
    }
  }
}

int64_t wrapping_neg(int64_t x) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); }

TEST(ElementwiseUnary, IntegerOpsKeepDtypeAndWrap) {
  check_integer_unary("abs", [](const Tensor& x) { return abs(x); },
                      [](int64_t x) { return x < 0 ? wrapping_neg(x) : x; }, false);
  check_integer_unary("neg", [](const Tensor& x) { return neg(x); }, wrapping_neg, true);
  check_integer_unary("sign", [](const Tensor& x) { return sign(x); },
                      [](int64_t x) { return int64_t{(0 < x) - (x < 0)}; }, false);
  check_integer_unary("square", [](const Tensor& x) { return square(x); },
                      [](int64_t x) { return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(x)); },
                      true);
  check_integer_unary("relu", [](const Tensor& x) { return relu(x); }, [](int64_t x) { return x < 0 ? 0 : x; }, false);
  check_integer_unary("floor", [](const Tensor& x) { return floor(x); }, [](int64_t x) { return x; }, true);
  check_integer_unary("round", [](const Tensor& x) { return round(x); }, [](int64_t x) { return x; }, true);
  check_integer_unary("bitwise_not", [](const Tensor& x) { return bitwise_not(x); }, [](int64_t x) { return ~x; },
                      true);
}

TEST(ElementwiseUnary, UnsignedIntegerOps) {
  // Stored values of an unsigned dtype read back as their bit patterns.
  const Tensor x = make_int_tensor({0, 1, 200, 255}, DType::UInt8);
  EXPECT_EQ(to_int64s(abs(x)), (std::vector<int64_t>{0, 1, 200, 255}));
  EXPECT_EQ(to_int64s(neg(x)), (std::vector<int64_t>{0, 255, 56, 1}));
  EXPECT_EQ(to_int64s(sign(x)), (std::vector<int64_t>{0, 1, 1, 1}));
  const Tensor big = make_int_tensor({static_cast<int64_t>(uint64_t{1} << 63)}, DType::UInt64);
  EXPECT_EQ(to_int64s(sign(big))[0], 1);  // 2^63 is positive as uint64
}

TEST(ElementwiseUnary, BoolOps) {
  const Tensor b = make_int_tensor({0, 1, 1, 0}, DType::Bool);
  EXPECT_EQ(sign(b).dtype(), DType::Bool);
  EXPECT_EQ(to_int64s(sign(b)), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(to_int64s(bitwise_not(b)), (std::vector<int64_t>{1, 0, 0, 1}));
  const Tensor sq = square(b);  // pow(bool, 2) promotes to int64
  EXPECT_EQ(sq.dtype(), DType::Int64);
  EXPECT_EQ(to_int64s(sq), (std::vector<int64_t>{0, 1, 1, 0}));
}

// ---------------------------------------------------------------- complex

TEST(ElementwiseUnary, ComplexOps) {
  using C = std::complex<LD>;
  const std::vector<std::pair<std::function<Tensor(const Tensor&)>, std::function<C(C)>>> ops = {
      {[](const Tensor& x) { return neg(x); }, [](C z) { return -z; }},
      {[](const Tensor& x) { return exp(x); }, [](C z) { return std::exp(z); }},
      {[](const Tensor& x) { return log(x); }, [](C z) { return std::log(z); }},
      {[](const Tensor& x) { return sqrt(x); }, [](C z) { return std::sqrt(z); }},
      {[](const Tensor& x) { return reciprocal(x); }, [](C z) { return C(1) / z; }},
      {[](const Tensor& x) { return square(x); }, [](C z) { return z * z; }},
  };
  for (DType dtype : {DType::Complex64, DType::Complex128}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{9}, int64_t{1000}}) {
      std::vector<std::complex<double>> v;
      const std::vector<double> re = random_values(n, -5, 5, 3), im = random_values(n, -5, 5, 4);
      for (int64_t i = 0; i < n; ++i) v.emplace_back(re[size_t(i)], im[size_t(i)]);
      const Tensor x = make_complex_tensor(v, dtype);
      const std::vector<std::complex<double>> in = to_complexes(x);
      const double eps = dtype == DType::Complex64 ? std::ldexp(1.0, -23) : std::ldexp(1.0, -52);
      for (const auto& [op, ref] : ops) {
        const Tensor out = op(x);
        ASSERT_EQ(out.dtype(), dtype);
        const std::vector<std::complex<double>> got = to_complexes(out);
        for (size_t i = 0; i < in.size(); ++i) {
          const C r = ref(C(in[i].real(), in[i].imag()));
          const double err = std::abs(C(got[i].real(), got[i].imag()) - r);
          // Normwise: the C library's cexp/clog/csqrt are within a few ulp per part;
          // c10's division and the textbook product round 2-4 times per part -> 4 ulp
          // of |result|.
          EXPECT_LE(err, 4 * eps * double(std::abs(r))) << in[i];
        }
      }
      // abs returns the real dtype: hypot, correctly rounded to within 1 ulp.
      const Tensor a = abs(x);
      ASSERT_EQ(a.dtype(), to_real(dtype));
      const std::vector<double> got = to_doubles(a);
      for (size_t i = 0; i < in.size(); ++i) {
        EXPECT_TRUE(close_to(got[i], std::hypot(LD(in[i].real()), LD(in[i].imag())), to_real(dtype), 1));
      }
    }
  }
}

// ---------------------------------------------------------------- errors

TEST(ElementwiseUnaryErrors, DtypesAnOpDoesNotTake) {
  const Tensor b = make_int_tensor({0, 1}, DType::Bool);
  const Tensor i = make_int_tensor({1, 2}, DType::Int32);
  const Tensor c = make_complex_tensor({{1, 2}}, DType::Complex64);
  expect_error([&] { neg(b); }, ErrorKind::Runtime, "Negation, the `-` operator, on a bool tensor is not supported");
  expect_error([&] { abs(b); }, ErrorKind::Type, "abs: not supported for bool");
  expect_error([&] { sign(c); }, ErrorKind::Runtime, "Please use torch.sgn instead");
  expect_error([&] { silu(i); }, ErrorKind::Type, "silu: expected a floating-point tensor, got int32");
  expect_error([&] { gelu(b); }, ErrorKind::Type, "gelu: expected a floating-point tensor, got bool");
  expect_error([&] { softplus(i); }, ErrorKind::Type, "softplus: expected a floating-point tensor");
  expect_error([&] { silu(c); }, ErrorKind::NotImplemented, "silu: not implemented for complex");
  expect_error([&] { tanh(c); }, ErrorKind::NotImplemented, "tanh: not implemented for complex tensors (got complex64)");
  expect_error([&] { sigmoid(c); }, ErrorKind::NotImplemented, "sigmoid");
  expect_error([&] { relu(c); }, ErrorKind::NotImplemented, "relu");
  expect_error([&] { floor(b); }, ErrorKind::Type, "floor: not supported for bool");
  expect_error([&] { round(c); }, ErrorKind::NotImplemented, "round");
  expect_error([&] { relu(b); }, ErrorKind::Type, "relu: not supported for bool");
  expect_error([&] { bitwise_not(make_tensor({1.0}, DType::Float32)); }, ErrorKind::Type,
               "bitwise_not: expected bool or integer tensors, got float32");
  expect_error([&] { exp(Tensor()); }, ErrorKind::Runtime, "undefined tensor");
}

TEST(ElementwiseUnaryErrors, BadOptions) {
  const Tensor x = make_tensor({1.0}, DType::Float32);
  expect_error([&] { gelu(x, "erf"); }, ErrorKind::Value, "approximate argument must be either none or tanh");
  expect_error([&] { softplus(x, std::complex<double>(1, 1)); }, ErrorKind::Type, "beta and threshold must be real");
}

}  // namespace
}  // namespace kiln
