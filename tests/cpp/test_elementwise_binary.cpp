// Binary arithmetic (add, sub, mul, div and its rounding modes, remainder, pow,
// maximum, minimum, atan2) and the in-place ops, against long double / int64 scalar
// references over every dtype, the size sweep, strided and broadcast operands, each
// SIMD target, the IEEE special values, and every error path.
//
// Float tolerances as in test_elementwise_unary.cpp: budget * compute_eps +
// unit_roundoff(out), relative, plus min_normal(out). Integer results are exact.
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
#include "kiln/thread_pool.h"
#include "test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;

using namespace ew_test;
using LD = long double;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// v rounded to the precision the kernel computes in (float32 for every float dtype
// but float64): for ops defined by a rounded intermediate, like trunc(a / b).
LD in_compute(LD v, DType dtype) { return dtype == DType::Float64 ? LD(double(v)) : LD(float(v)); }

// Python's float floor division, in long double (PyTorch's div_floor_floating).
LD python_floordiv(LD a, LD b) {
  if (b == 0) return a / b;
  const LD mod = std::fmod(a, b);
  LD div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(LD(0), a / b);
  LD floordiv = std::floor(div);
  if (div - floordiv > LD(0.5)) floordiv += 1;
  return floordiv;
}

LD python_remainder(LD a, LD b) {
  LD mod = std::fmod(a, b);
  if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
  return mod;
}

LD nan_max(LD a, LD b) { return std::isnan(a) || std::isnan(b) ? LD(kNaN) : std::max(a, b); }
LD nan_min(LD a, LD b) { return std::isnan(a) || std::isnan(b) ? LD(kNaN) : std::min(a, b); }

struct FloatBinaryCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<LD(LD, LD, DType)> ref;  // DType: the operands' dtype (see in_compute)
  double budget;                         // ulps of the compute dtype
  double lo_a, hi_a, lo_b, hi_b;
};

// Pairs every special value with every other (and ordinary ones).
std::pair<std::vector<double>, std::vector<double>> special_pairs() {
  const std::vector<double> s = {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 2.5, -7.0, 1e-40, 3e38};
  std::vector<double> a, b;
  for (double x : s) {
    for (double y : s) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  return {a, b};
}

std::vector<FloatBinaryCase> float_binary_cases() {
  // One IEEE operation, correctly rounded in the compute dtype: 0.5 ulp (then the final
  // rounding of a narrow output).
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, [](LD a, LD b, DType) { return a + b; },
       0.5, -100, 100, -100, 100},
      // a + 2.5 b as one fused multiply-add (2.5 is exact in every compute dtype).
      {"add_alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); },
       [](LD a, LD b, DType) { return a + LD(2.5) * b; }, 0.5, -100, 100, -100, 100},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, [](LD a, LD b, DType) { return a - b; },
       0.5, -100, 100, -100, 100},
      {"sub_alpha", [](const Tensor& a, const Tensor& b) { return sub(a, b, -3); },
       [](LD a, LD b, DType) { return a + 3 * b; }, 0.5, -100, 100, -100, 100},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, [](LD a, LD b, DType) { return a * b; },
       0.5, -100, 100, -100, 100},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, [](LD a, LD b, DType) { return a / b; },
       0.5, -100, 100, -10, 10},
      // PyTorch's trunc(a / b): the rounded quotient truncated, so exact against that.
      {"div_trunc", [](const Tensor& a, const Tensor& b) { return div(a, b, "trunc"); },
       [](LD a, LD b, DType t) { return std::trunc(in_compute(a / b, t)); }, 0, -100, 100, -10, 10},
      // Python's //: from the exact fmod; the quotient (a - mod) / b rounds once (0.5 ulp).
      {"div_floor", [](const Tensor& a, const Tensor& b) { return div(a, b, "floor"); },
       [](LD a, LD b, DType) { return python_floordiv(a, b); }, 0.5, -100, 100, -10, 10},
      // fmod is exact; adding b when the signs differ rounds once.
      {"remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); },
       [](LD a, LD b, DType) { return python_remainder(a, b); }, 0.5, -100, 100, -10, 10},
      // glibc's pow/powf are within 1 ulp.
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](LD a, LD b, DType) { return std::pow(a, b); }, 1, 0, 10, -6, 6},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](LD a, LD b, DType) { return nan_max(a, b); }, 0, -100, 100, -100, 100},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](LD a, LD b, DType) { return nan_min(a, b); }, 0, -100, 100, -100, 100},
      // glibc's atan2/atan2f are within 1 ulp.
      {"atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); },
       [](LD a, LD b, DType) { return std::atan2(a, b); }, 1, -100, 100, -100, 100},
  };
}

void check_float_binary(const FloatBinaryCase& c, const Tensor& a, const Tensor& b, DType dtype) {
  const Tensor out = c.op(a, b);
  ASSERT_EQ(out.dtype(), dtype);
  const Tensor wa = a.expand(out.sizes()), wb = b.expand(out.sizes());
  const std::vector<double> va = to_doubles(wa), vb = to_doubles(wb), got = to_doubles(out);
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    const auto ok = close_to(got[i], c.ref(va[i], vb[i], dtype), dtype, c.budget);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << c.name << "(" << va[i] << ", " << vb[i] << ") on " << dtype_name(dtype) << ": "
                    << ok.message();
    }
  }
}

void check_float_case(const FloatBinaryCase& c, DType dtype, int64_t n, Layout layout) {
  auto [sa, sb] = special_pairs();
  if (c.name == "pow") sa.insert(sa.end(), {-2.0, -2.0, -0.5}), sb.insert(sb.end(), {3.0, -2.0, 2.0});
  const uint64_t seed = 31 + static_cast<uint64_t>(n);
  const Tensor a = make_tensor(random_values(n, c.lo_a, c.hi_a, seed, sa), dtype, layout);
  const Tensor b = make_tensor(random_values(n, c.lo_b, c.hi_b, seed + 1, sb), dtype, layout);
  check_float_binary(c, a, b, dtype);
}

TEST(ElementwiseBinary, FloatOpsMatchReferenceForAllDtypesSizesAndLayouts) {
  for (const auto& c : float_binary_cases()) {
    for (DType dtype : kFloatDtypes) {
      for (int64_t n : kSizes) {
        for (Layout layout : kLayouts) {
          if (n > 1000 && layout != Layout::Contiguous) continue;
          SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n) + " " +
                       layout_name(layout));
          check_float_case(c, dtype, n, layout);
        }
      }
    }
  }
}

TEST(ElementwiseBinary, FloatOpsMatchReferenceOnEachSimdTarget) {
  for_each_simd_target([] {
    for (const auto& c : float_binary_cases()) {
      for (DType dtype : {DType::Float32, DType::Float64}) {
        for (int64_t n : kTargetSizes) {
          SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
          check_float_case(c, dtype, n, Layout::Contiguous);
        }
      }
    }
  });
}

TEST(ElementwiseBinary, BroadcastOperands) {
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Float64}) {
    const Tensor col = make_tensor(random_values(37, -5, 5, 1), dtype).view({37, 1});
    const Tensor row = make_tensor(random_values(29, -5, 5, 2), dtype).view({1, 29});
    const Tensor scalar0d = make_tensor({1.5}, dtype).view({});
    const Tensor row_t = make_tensor(random_values(29 * 37, -5, 5, 3), dtype).view({29, 37}).t();  // [37, 29]
    for (const auto& c : float_binary_cases()) {
      if (c.name == "pow" || c.name == "atan2") continue;
      SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
      check_float_binary(c, col, row, dtype);       // [37,1] x [1,29] -> [37,29]
      check_float_binary(c, row_t, scalar0d, dtype);  // transposed x 0-dim
      check_float_binary(c, scalar0d, col, dtype);
      EXPECT_EQ(c.op(col, row).sizes(), (Shape{37, 29}));
    }
  }
}

// A Scalar keeps the compute dtype's precision: bf16 * 0.1 multiplies by float32(0.1).
TEST(ElementwiseBinary, TensorScalarOps) {
  for (DType dtype : kFloatDtypes) {
    const Tensor a = make_tensor(random_values(1000, -50, 50, 9), dtype, Layout::Strided);
    const std::vector<double> va = to_doubles(a);
    const LD s = dtype == DType::Float64 ? LD(0.1) : LD(0.1f);
    const std::vector<std::pair<Tensor, std::function<LD(LD)>>> cases = {
        {add(a, 0.1), [&](LD x) { return x + s; }},
        {add(a, 0.1, 2), [&](LD x) { return x + 2 * s; }},
        {sub(a, 0.1), [&](LD x) { return x - s; }},
        {mul(a, 0.1), [&](LD x) { return x * s; }},
        {div(a, 0.1), [&](LD x) { return x / s; }},
        {remainder(a, 0.1), [&](LD x) { return python_remainder(x, s); }},
        {remainder(0.1, a), [&](LD x) { return python_remainder(s, x); }},
        {pow(a, 2.5), [&](LD x) { return std::pow(x, LD(2.5)); }},
        {pow(2.5, a), [&](LD x) { return std::pow(LD(2.5), x); }},
        {add(a, int64_t{3}), [&](LD x) { return x + 3; }},
        {mul(a, true), [&](LD x) { return x; }},
    };
    for (size_t k = 0; k < cases.size(); ++k) {
      const auto& [out, ref] = cases[k];
      ASSERT_EQ(out.dtype(), dtype) << k;
      const std::vector<double> got = to_doubles(out);
      // One rounding (0.5 ulp), pow 1 ulp, as above.
      for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close_to(got[i], ref(va[i]), dtype, 1)) << k << " " << va[i];
    }
  }
}

TEST(ElementwiseBinary, ResultDtypes) {
  const Tensor i8 = make_int_tensor({1, 2}, DType::Int8);
  const Tensor u8 = make_int_tensor({1, 2}, DType::UInt8);
  const Tensor i32 = make_int_tensor({1, 2}, DType::Int32);
  const Tensor b = make_int_tensor({0, 1}, DType::Bool);
  const Tensor h = make_tensor({1, 2}, DType::Float16);
  const Tensor bf = make_tensor({1, 2}, DType::BFloat16);
  EXPECT_EQ(add(u8, i8).dtype(), DType::Int16);
  EXPECT_EQ(add(i32, h).dtype(), DType::Float16);
  EXPECT_EQ(add(h, bf).dtype(), DType::Float32);
  EXPECT_EQ(add(b, b).dtype(), DType::Bool);
  EXPECT_EQ(add(i8, 1000).dtype(), DType::Int8);  // a wrapped int keeps the tensor's dtype
  EXPECT_EQ(add(i8, 2.5).dtype(), DType::Float32);
  EXPECT_EQ(add(h, 2.5).dtype(), DType::Float16);
  EXPECT_EQ(add(b, 1).dtype(), DType::Int64);
  EXPECT_EQ(div(i32, i32).dtype(), DType::Float32);
  EXPECT_EQ(div(b, b).dtype(), DType::Float32);
  EXPECT_EQ(div(i32, i32, "floor").dtype(), DType::Int32);
  EXPECT_EQ(div(i32, 2, "trunc").dtype(), DType::Int32);
  EXPECT_EQ(atan2(i32, i32).dtype(), DType::Float32);
  EXPECT_EQ(pow(i32, 2).dtype(), DType::Int32);
  EXPECT_EQ(pow(i32, 0.5).dtype(), DType::Float32);
  EXPECT_EQ(pow(2, i32).dtype(), DType::Int32);
  EXPECT_EQ(pow(2.0, i32).dtype(), DType::Float32);
  EXPECT_EQ(mul(i32, std::complex<double>(0, 1)).dtype(), DType::Complex64);
  const Tensor e4 = make_tensor({1, 2}, DType::Float8_e4m3fn);
  EXPECT_EQ(add(e4, e4).dtype(), DType::Float8_e4m3fn);
  EXPECT_EQ(mul(e4, 2.0).dtype(), DType::Float8_e4m3fn);
  // i8 + 1000: 1000 wraps to int8 (-24) first, as PyTorch.
  EXPECT_EQ(to_int64s(add(i8, 1000)), (std::vector<int64_t>{-23, -22}));
}

// ---------------------------------------------------------------- integers

// a and b as stored in `dtype` (int64 holding the bits of a uint64), to the result.
using IntRef = std::function<int64_t(int64_t, int64_t, DType)>;

bool u64(DType t) { return t == DType::UInt64; }
uint64_t bits(int64_t v) { return static_cast<uint64_t>(v); }

int64_t ref_div_trunc(int64_t a, int64_t b, DType t) {
  if (u64(t)) return static_cast<int64_t>(bits(a) / bits(b));
  if (b == -1) return static_cast<int64_t>(0 - bits(a));  // wraps at INT64_MIN
  return a / b;
}
int64_t ref_div_floor(int64_t a, int64_t b, DType t) {
  if (u64(t) || is_unsigned(t)) return ref_div_trunc(a, b, t);
  const int64_t q = ref_div_trunc(a, b, t);
  return ((a < 0) != (b < 0) && bits(q) * bits(b) != bits(a)) ? q - 1 : q;
}
int64_t ref_remainder(int64_t a, int64_t b, DType t) {
  if (u64(t)) return static_cast<int64_t>(bits(a) % bits(b));
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && (r < 0) != (b < 0)) r += b;
  return r;
}
int64_t ref_pow(int64_t a, int64_t b, DType t) {
  if (!is_unsigned(t) && b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = bits(a);
  for (uint64_t e = bits(b); e != 0; e >>= 1) {
    if (e & 1) r *= base;
    base *= base;
  }
  return static_cast<int64_t>(r);
}
int64_t ref_max(int64_t a, int64_t b, DType t) { return u64(t) ? (bits(a) > bits(b) ? a : b) : std::max(a, b); }
int64_t ref_min(int64_t a, int64_t b, DType t) { return u64(t) ? (bits(a) < bits(b) ? a : b) : std::min(a, b); }

void check_integer_binary(const char* name, const std::function<Tensor(const Tensor&, const Tensor&)>& op,
                          const IntRef& ref, bool nonzero_b, bool small_b) {
  for (DType dtype : kIntDtypes) {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{100003}}) {
      SCOPED_TRACE(std::string(name) + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      const std::vector<int64_t> extremes = {INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, -128, 127, 255, -1, 0, 1, 7};
      std::vector<int64_t> va(static_cast<size_t>(n)), vb(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        va[size_t(i)] = i < 121 ? extremes[size_t(i % 11)] : (i * 2654435761LL) % 20001 - 10000;
        vb[size_t(i)] = i < 121 ? extremes[size_t(i / 11 % 11)] : (i * 40503LL) % 61 - 30;
        if (small_b) vb[size_t(i)] = (vb[size_t(i)] % 70 + 70) % 70 - 5;  // exponents and shifts in [-5, 64]
      }
      Tensor a = make_int_tensor(va, dtype), b = make_int_tensor(vb, dtype);
      std::vector<int64_t> sa = to_int64s(a), sb = to_int64s(b);
      if (nonzero_b) {
        for (auto& v : sb) v = v == 0 ? 3 : v;
        b = make_int_tensor(sb, dtype);
      }
      const Tensor out = op(a, b);
      ASSERT_EQ(out.dtype(), dtype);
      std::vector<int64_t> want(sa.size());
      for (size_t i = 0; i < sa.size(); ++i) want[i] = ref(sa[i], sb[i], dtype);
      // The int64 reference wrapped into the dtype (its low bits, sign-extended).
      EXPECT_EQ(to_int64s(out), to_int64s(make_int_tensor(want, dtype)));
    }
  }
}

TEST(ElementwiseBinary, IntegerOpsWrapAndMatchReference) {
  check_integer_binary("add", [](const Tensor& a, const Tensor& b) { return add(a, b, 3); },
                       [](int64_t a, int64_t b, DType) { return int64_t(bits(a) + 3 * bits(b)); }, false, false);
  check_integer_binary("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
                       [](int64_t a, int64_t b, DType) { return int64_t(bits(a) - bits(b)); }, false, false);
  check_integer_binary("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
                       [](int64_t a, int64_t b, DType) { return int64_t(bits(a) * bits(b)); }, false, false);
  check_integer_binary("div_trunc", [](const Tensor& a, const Tensor& b) { return div(a, b, "trunc"); },
                       ref_div_trunc, true, false);
  check_integer_binary("div_floor", [](const Tensor& a, const Tensor& b) { return div(a, b, "floor"); },
                       ref_div_floor, true, false);
  check_integer_binary("remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, ref_remainder,
                       true, false);
  check_integer_binary("pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, ref_pow, false, true);
  check_integer_binary("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, ref_max, false,
                       false);
  check_integer_binary("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, ref_min, false,
                       false);
}

TEST(ElementwiseBinary, IntegerTrueDivisionGivesFloat32) {
  const Tensor a = make_int_tensor({7, -7, 1, 0, 0, (int64_t{1} << 40) + 1}, DType::Int64);
  const Tensor b = make_int_tensor({2, 2, 3, 0, -5, 1}, DType::Int64);
  const std::vector<double> got = to_doubles(div(a, b));
  // Both operands are converted to float32 first (2^40 + 1 -> 2^40), then divided once.
  const std::vector<double> want = {3.5, -3.5, double(1.0f / 3.0f), kNaN, -0.0, std::ldexp(1.0, 40)};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(close_to(got[i], want[i], DType::Float32, 0)) << i;
  EXPECT_TRUE(std::signbit(got[4]));
}

TEST(ElementwiseBinary, IntegerEdgeCasesPinned) {
  const Tensor mn = make_int_tensor({INT64_MIN, INT32_MIN}, DType::Int64);
  const Tensor m1 = make_int_tensor({-1, -1}, DType::Int64);
  EXPECT_EQ(to_int64s(div(mn, m1, "trunc")), (std::vector<int64_t>{INT64_MIN, -int64_t{INT32_MIN}}));
  EXPECT_EQ(to_int64s(div(mn, m1, "floor"))[0], INT64_MIN);
  EXPECT_EQ(to_int64s(remainder(mn, m1)), (std::vector<int64_t>{0, 0}));
  const Tensor a = make_int_tensor({7, -7, 7, -7}, DType::Int32);
  const Tensor b = make_int_tensor({2, 2, -2, -2}, DType::Int32);
  EXPECT_EQ(to_int64s(div(a, b, "trunc")), (std::vector<int64_t>{3, -3, -3, 3}));
  EXPECT_EQ(to_int64s(div(a, b, "floor")), (std::vector<int64_t>{3, -4, -4, 3}));
  EXPECT_EQ(to_int64s(remainder(a, b)), (std::vector<int64_t>{1, 1, -1, -1}));
  // Negative integer exponents of integer tensors truncate (PyTorch's powi).
  const Tensor base = make_int_tensor({1, -1, -1, 2, 0}, DType::Int64);
  const Tensor ex = make_int_tensor({-3, -3, -2, -1, 0}, DType::Int64);
  EXPECT_EQ(to_int64s(pow(base, ex)), (std::vector<int64_t>{1, -1, 1, 0, 1}));
  // uint64 beyond int64's range divides as unsigned.
  const Tensor big = make_int_tensor({static_cast<int64_t>(~uint64_t{0})}, DType::UInt64);
  EXPECT_EQ(bits(to_int64s(div(big, 2, "floor"))[0]), ~uint64_t{0} / 2);
}

TEST(ElementwiseBinary, BoolArithmeticIsLogic) {
  const Tensor a = make_int_tensor({0, 0, 1, 1}, DType::Bool);
  const Tensor b = make_int_tensor({0, 1, 0, 1}, DType::Bool);
  EXPECT_EQ(to_int64s(add(a, b)), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(to_int64s(add(a, b, false)), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(to_int64s(mul(a, b)), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(to_int64s(maximum(a, b)), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(to_int64s(minimum(a, b)), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(add(a, b).dtype(), DType::Bool);
  EXPECT_EQ(to_doubles(div(a, b))[2], kInf);
}

// ---------------------------------------------------------------- pow shortcuts

TEST(ElementwiseBinary, PowTensorScalarShortcuts) {
  const std::vector<double> v = {-2.0, -0.0, 0.0, 0.25, 3.0, kInf, kNaN};
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16}) {
    const Tensor x = make_tensor(v, dtype);
    const std::vector<double> in = to_doubles(x);
    // PyTorch's shortcut kernels: 2 -> x*x, 3 -> x*x*x, 0.5 -> sqrt, -0.5 -> 1/sqrt,
    // -1 -> 1/x, -2 -> 1/(x*x); each within 1 ulp (two roundings at most).
    const std::vector<std::pair<double, std::function<LD(LD)>>> cases = {
        {2.0, [](LD a) { return a * a; }},          {3.0, [](LD a) { return a * a * a; }},
        {0.5, [](LD a) { return std::sqrt(a); }},   {-0.5, [](LD a) { return 1 / std::sqrt(a); }},
        {-1.0, [](LD a) { return 1 / a; }},         {-2.0, [](LD a) { return 1 / (a * a); }},
        {1.7, [](LD a) { return std::pow(a, LD(1.7)); }},
    };
    for (const auto& [e, ref] : cases) {
      const std::vector<double> got = to_doubles(pow(x, e));
      for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(close_to(got[i], ref(in[i]), dtype, 1)) << e << " " << in[i];
    }
    // pow(x, 0) is all ones (NaN included) and pow(x, 1) a copy, as PyTorch.
    for (double g : to_doubles(pow(x, 0))) EXPECT_EQ(g, 1.0);
    const Tensor same = pow(x, 1);
    EXPECT_FALSE(same.is_same(x));
    const std::vector<double> copy = to_doubles(same);
    for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(std::isnan(in[i]) ? std::isnan(copy[i]) : copy[i] == in[i]);
    // sqrt's sign of zero, not pow's: pow(-0.0, 0.5) is -0.0 here as in PyTorch.
    EXPECT_TRUE(std::signbit(to_doubles(pow(x, 0.5))[1]));
  }
  const Tensor ints = make_int_tensor({-3, 0, 5}, DType::Int32);
  EXPECT_EQ(to_int64s(pow(ints, 2)), (std::vector<int64_t>{9, 0, 25}));
  EXPECT_EQ(to_int64s(pow(ints, 3)), (std::vector<int64_t>{-27, 0, 125}));
  EXPECT_EQ(to_int64s(pow(ints, 5)), (std::vector<int64_t>{-243, 0, 3125}));
  EXPECT_EQ(to_int64s(pow(2, ints)), (std::vector<int64_t>{0, 1, 32}));
  EXPECT_EQ(pow(make_int_tensor({1, 0}, DType::Bool), 2).dtype(), DType::Int64);
}

// float32 pow runs through float64 vectors with its own special-case handling: every
// pair of C99's special arguments (Annex F.9.4.4), and powers that overflow, underflow
// and land among the subnormals, against the long double C library.
TEST(ElementwiseBinary, PowSpecialCasesAndRangesOnEachSimdTarget) {
  const std::vector<double> s = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5,
                                 kInf, -kInf, kNaN, 1e-40, -1e-40, 1e30, -1e30, 7.0, -7.0};
  std::vector<double> a, b;
  for (double x : s) {
    for (double y : s) a.push_back(x), b.push_back(y);
  }
  const std::vector<double> ra = random_values(2000, -60, 60, 8), rb = random_values(2000, -45, 45, 9);
  for (size_t i = 0; i < ra.size(); ++i) {
    a.push_back(ra[i]);
    b.push_back(i % 2 ? std::round(rb[i]) : rb[i]);  // integer exponents keep negative bases real
  }
  for_each_simd_target([&] {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      const Tensor ta = make_tensor(a, dtype), tb = make_tensor(b, dtype);
      const std::vector<double> va = to_doubles(ta), vb = to_doubles(tb), got = to_doubles(pow(ta, tb));
      for (size_t i = 0; i < got.size(); ++i) {
        // 1 ulp: float32 is within 2^-52 * (4|w| + 2) of exact before its final rounding
        // (see PowOfFloats); float64 is glibc's pow (< 1 ulp).
        const auto ok = close_to(got[i], std::pow(LD(va[i]), LD(vb[i])), dtype, 1);
        EXPECT_TRUE(ok) << "pow(" << va[i] << ", " << vb[i] << ") " << dtype_name(dtype) << ": " << ok.message();
        if (got[i] == 0) EXPECT_EQ(std::signbit(got[i]), std::signbit(double(std::pow(LD(va[i]), LD(vb[i])))));
      }
    }
  });
}

// ---------------------------------------------------------------- complex

TEST(ElementwiseBinary, ComplexArithmetic) {
  using C = std::complex<LD>;
  for (DType dtype : {DType::Complex64, DType::Complex128}) {
    const int64_t n = 1000;
    std::vector<std::complex<double>> va, vb;
    const auto r1 = random_values(n, -4, 4, 1), r2 = random_values(n, -4, 4, 2);
    const auto r3 = random_values(n, -4, 4, 3), r4 = random_values(n, -4, 4, 4);
    for (int64_t i = 0; i < n; ++i) va.emplace_back(r1[size_t(i)], r2[size_t(i)]), vb.emplace_back(r3[size_t(i)], r4[size_t(i)]);
    const Tensor a = make_complex_tensor(va, dtype), b = make_complex_tensor(vb, dtype);
    const auto sa = to_complexes(a), sb = to_complexes(b);
    const C alpha(0.5, -2);
    const std::vector<std::pair<Tensor, std::function<C(C, C)>>> cases = {
        {add(a, b), [](C x, C y) { return x + y; }},
        {add(a, b, std::complex<double>(0.5, -2)), [&](C x, C y) { return x + alpha * y; }},
        {sub(a, b), [](C x, C y) { return x - y; }},
        {mul(a, b), [](C x, C y) { return x * y; }},
        {div(a, b), [](C x, C y) { return x / y; }},
        {pow(a, b), [](C x, C y) { return std::pow(x, y); }},
        {mul(a, std::complex<double>(0, 1)), [](C x, C) { return x * C(0, 1); }},
    };
    const double eps = dtype == DType::Complex64 ? std::ldexp(1.0, -23) : std::ldexp(1.0, -52);
    for (size_t k = 0; k < cases.size(); ++k) {
      const auto& [out, ref] = cases[k];
      ASSERT_EQ(out.dtype(), dtype);
      const auto got = to_complexes(out);
      for (size_t i = 0; i < got.size(); ++i) {
        const C x(sa[i].real(), sa[i].imag()), y(sb[i].real(), sb[i].imag());
        const C r = ref(x, y);
        // Normwise. A sum is relative to its terms (it may cancel), a product to |x||y|:
        // the textbook product and c10's scaled quotient round 2-4 times per part -> 4
        // ulp. pow is exp(y log x): log's few ulp on w = y log x become |w| times that
        // in the result -> 4 + 2|w| ulp of |result|.
        LD scale = std::abs(r);
        double budget = 4;
        if (k <= 2) scale = std::max({scale, std::abs(x), std::abs(y) * std::max(LD(1), std::abs(alpha))});
        if (k == 3 || k == 6) scale = std::abs(x) * std::max(std::abs(y), LD(1));
        if (k == 5) budget = 4 + 2 * double(std::abs(y * std::log(x)));
        EXPECT_LE(double(std::abs(C(got[i].real(), got[i].imag()) - r)), budget * eps * double(scale)) << k;
      }
    }
  }
}

// ---------------------------------------------------------------- in place

TEST(ElementwiseBinary, InPlaceOps) {
  Tensor a = make_tensor({1, 2, 3, 4, 5, 6}, DType::Float32).view({2, 3});
  const Tensor row = make_tensor({10, 20, 30}, DType::Float32);
  Tensor& r = add_(a, row, 2);
  EXPECT_TRUE(r.is_same(a));
  EXPECT_EQ(to_doubles(a), (std::vector<double>{21, 42, 63, 24, 45, 66}));
  sub_(a, 1.0);
  mul_(a, 2);
  div_(a, make_tensor({2}, DType::Float32));
  EXPECT_EQ(to_doubles(a), (std::vector<double>{20, 41, 62, 23, 44, 65}));
  div_(a, 3.0, "floor");
  EXPECT_EQ(to_doubles(a), (std::vector<double>{6, 13, 20, 7, 14, 21}));
  // A narrow self: computed in float32, stored in bf16.
  Tensor h = make_tensor({1, 2, 3}, DType::BFloat16);
  add_(h, make_tensor({0.5, 0.25, 0.125}, DType::Float32));
  EXPECT_EQ(h.dtype(), DType::BFloat16);
  EXPECT_EQ(to_doubles(h), (std::vector<double>{1.5, 2.25, 3.125}));
  // A non-contiguous self (a transposed view) and self as its own operand.
  Tensor base = make_tensor({1, 2, 3, 4, 5, 6}, DType::Float64).view({2, 3});
  Tensor t = base.t();
  add_(t, t);
  EXPECT_EQ(to_doubles(base), (std::vector<double>{2, 4, 6, 8, 10, 12}));
  // uint8 with a negative alpha wraps (c10's conversion rule): 5 + (-1) * 3 = 2.
  EXPECT_EQ(to_int64s(add(make_int_tensor({5}, DType::UInt8), make_int_tensor({3}, DType::UInt8), -1)),
            (std::vector<int64_t>{2}));
  // Integer self with integer operands, and with rounding division.
  Tensor i = make_int_tensor({7, -7}, DType::Int16);
  add_(i, int64_t{1});
  div_(i, 2, "floor");
  EXPECT_EQ(to_int64s(i), (std::vector<int64_t>{4, -3}));
  EXPECT_EQ(i.dtype(), DType::Int16);
}

// ---------------------------------------------------------------- threads

// The loop engine splits long arrays across the pool; the split must not change any bit.
TEST(ElementwiseBinary, ThreadCountDoesNotChangeResults) {
  const Tensor a = make_tensor(random_values(100003, -10, 10, 1), DType::BFloat16);
  const Tensor b = make_tensor(random_values(100003, -10, 10, 2), DType::Float32);
  auto run = [&] {
    return std::vector<std::vector<double>>{to_doubles(add(a, b)), to_doubles(gelu(b)), to_doubles(div(a, b, "floor")),
                                            to_doubles(exp(a))};
  };
  const int original = default_num_threads();
  set_num_threads(1);
  const auto one = run();
  set_num_threads(4);
  const auto four = run();
  set_num_threads(original);
  for (size_t k = 0; k < one.size(); ++k) {
    ASSERT_EQ(one[k].size(), four[k].size());
    for (size_t i = 0; i < one[k].size(); ++i) {
      EXPECT_TRUE(one[k][i] == four[k][i] || (std::isnan(one[k][i]) && std::isnan(four[k][i]))) << k << " " << i;
    }
  }
}

// ---------------------------------------------------------------- errors

TEST(ElementwiseBinaryErrors, Arithmetic) {
  const Tensor f = make_tensor({1, 2, 3}, DType::Float32);
  const Tensor i = make_int_tensor({1, 0, 3}, DType::Int64);
  const Tensor b = make_int_tensor({1, 0, 1}, DType::Bool);
  const Tensor c = make_complex_tensor({{1, 1}, {2, 2}, {3, 3}}, DType::Complex64);
  expect_error([&] { add(f, make_tensor({1, 2}, DType::Float32)); }, ErrorKind::Runtime,
               "the size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0");
  expect_error([&] { div(f, f, "round"); }, ErrorKind::Value,
               "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'");
  expect_error([&] { div(i, i, "trunc"); }, ErrorKind::Runtime, "div: ZeroDivisionError");
  expect_error([&] { div(i, 0, "floor"); }, ErrorKind::Runtime, "ZeroDivisionError");
  expect_error([&] { remainder(i, i); }, ErrorKind::Runtime, "remainder: ZeroDivisionError");
  expect_error([&] { add(i, i, 2.5); }, ErrorKind::Runtime,
               "For integral input tensors, argument alpha must not be a floating point number.");
  expect_error([&] { add(f, f, true); }, ErrorKind::Runtime, "Boolean alpha only supported for Boolean results.");
  expect_error([&] { add(f, f, std::complex<double>(1, 1)); }, ErrorKind::Runtime,
               "For non-complex input tensors, argument alpha must not be a complex number.");
  expect_error([&] { add(make_int_tensor({1}, DType::Int8), make_int_tensor({1}, DType::Int8), 300); },
               ErrorKind::Runtime, "value cannot be converted to type int8 without overflow: 300");
  expect_error([&] { sub(b, b); }, ErrorKind::Runtime,
               "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()`");
  expect_error([&] { sub(f, b); }, ErrorKind::Runtime, "Subtraction, the `-` operator, with a bool tensor is not supported.");
  expect_error([&] { sub(f, true); }, ErrorKind::Runtime, "with a bool tensor is not supported");
  expect_error([&] { pow(i, -1); }, ErrorKind::Runtime, "Integers to negative integer powers are not allowed.");
  expect_error([&] { pow(b, b); }, ErrorKind::Type, "pow: not supported for bool");
  expect_error([&] { remainder(b, b); }, ErrorKind::Type, "remainder: not supported for bool");
  expect_error([&] { div(b, b, "trunc"); }, ErrorKind::Type, "rounding division is not supported for bool");
  expect_error([&] { maximum(c, c); }, ErrorKind::NotImplemented, "maximum: not implemented for complex tensors");
  expect_error([&] { minimum(c, f); }, ErrorKind::NotImplemented, "minimum: not implemented for complex");
  expect_error([&] { remainder(c, c); }, ErrorKind::NotImplemented, "remainder: not implemented for complex");
  expect_error([&] { div(c, c, "floor"); }, ErrorKind::NotImplemented, "div: not implemented for complex");
  expect_error([&] { atan2(c, c); }, ErrorKind::NotImplemented, "atan2");
  expect_error([&] { add(make_tensor({1}, DType::Float8_e4m3fn), f); }, ErrorKind::Type,
               "Promotion for Float8 Types is not supported");
  expect_error([&] { mul(Tensor(), f); }, ErrorKind::Runtime, "mul: argument 'input' is an undefined tensor");
}

TEST(ElementwiseBinaryErrors, InPlace) {
  Tensor i = make_int_tensor({1, 2, 3}, DType::Int64);
  Tensor b = make_int_tensor({1, 0, 1}, DType::Bool);
  Tensor f = make_tensor({1, 2, 3}, DType::Float32);
  expect_error([&] { add_(i, f); }, ErrorKind::Runtime, "result type Float can't be cast to the desired output type Long");
  expect_error([&] { div_(i, i); }, ErrorKind::Runtime, "result type Float can't be cast to the desired output type Long");
  expect_error([&] { mul_(i, 1.5); }, ErrorKind::Runtime, "result type Float can't be cast");
  expect_error([&] { add_(b, int64_t{1}); }, ErrorKind::Runtime, "result type Long can't be cast to the desired output type Bool");
  expect_error([&] { mul_(f, std::complex<double>(0, 1)); }, ErrorKind::Runtime,
               "result type ComplexFloat can't be cast to the desired output type Float");
  Tensor row = make_tensor({1, 2, 3}, DType::Float32);
  expect_error([&] { add_(row, make_tensor({1, 2, 3, 4, 5, 6}, DType::Float32).view({2, 3})); }, ErrorKind::Runtime,
               "output with shape [3] doesn't match the broadcast shape [2, 3]");
  Tensor expanded = make_tensor({1}, DType::Float32).expand({4});
  expect_error([&] { add_(expanded, 1.0); }, ErrorKind::Runtime, "more than one element of the written-to tensor");
  Tensor m = make_tensor({1, 2, 3, 4, 5, 6}, DType::Float32).view({2, 3});
  Tensor m_row0 = m.select(0, 0);
  Tensor m_row1 = m.select(0, 1);
  expect_error([&] { add_(m, m_row0); }, ErrorKind::Runtime,
               "some elements of the input tensor and the written-to tensor refer to a single memory location");
  // Disjoint views of one buffer are fine.
  add_(m_row1, m_row0);
  EXPECT_EQ(to_doubles(m_row1), (std::vector<double>{5, 7, 9}));
}

}  // namespace
}  // namespace kiln
