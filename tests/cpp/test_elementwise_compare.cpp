// Comparisons, isnan/isinf/isfinite, logical and bitwise ops, where and clamp against
// scalar references over every dtype, the size sweep, strided and broadcast operands,
// the special values, and every error path. All results here are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <optional>
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

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<bool> to_bools(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::Bool);
  std::vector<bool> out;
  for (int64_t v : to_int64s(t)) out.push_back(v != 0);
  return out;
}

// Values of any real dtype as long double, unsigned 64-bit ones from their bits.
std::vector<long double> stored_values(const Tensor& t) {
  std::vector<long double> out;
  if (t.dtype() == DType::UInt64) {
    for (int64_t v : to_int64s(t)) out.push_back(static_cast<long double>(static_cast<uint64_t>(v)));
  } else if (is_integral(t.dtype(), true)) {
    for (int64_t v : to_int64s(t)) out.push_back(static_cast<long double>(v));
  } else {
    for (double v : to_doubles(t)) out.push_back(v);
  }
  return out;
}

// n values of `dtype`: specials and extremes first, then a spread with many ties.
Tensor sample(DType dtype, int64_t n, uint64_t seed, Layout layout = Layout::Contiguous) {
  if (is_floating(dtype)) {
    const std::vector<double> v = random_values(n, -4, 4, seed, {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, 2.0, -1.0});
    std::vector<double> rounded(v.size());
    // Rounded to halves so that equal pairs are common.
    for (size_t i = 0; i < v.size(); ++i) rounded[i] = i < 8 ? v[i] : std::round(v[i] * 2) / 2;
    return make_tensor(rounded, dtype, layout);
  }
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double((i * 7 + int64_t(seed) * 3) % 9) - (is_unsigned(dtype) ? 0 : 4);
  if (dtype == DType::Bool) {
    for (auto& x : v) x = x > 2 ? 1 : 0;
  }
  return make_tensor(v, dtype, layout);
}

std::vector<DType> real_dtypes() {
  std::vector<DType> all = kFloatDtypes;
  all.insert(all.end(), kIntDtypes.begin(), kIntDtypes.end());
  all.push_back(DType::Bool);
  return all;
}

// ---------------------------------------------------------------- comparisons

struct CompareCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<Tensor(const Tensor&, const Scalar&)> op_scalar;
  std::function<bool(long double, long double)> ref;
};

std::vector<CompareCase> compare_cases() {
  return {
      {"eq", [](auto& a, auto& b) { return eq(a, b); }, [](auto& a, auto& s) { return eq(a, s); },
       [](long double a, long double b) { return a == b; }},
      {"ne", [](auto& a, auto& b) { return ne(a, b); }, [](auto& a, auto& s) { return ne(a, s); },
       [](long double a, long double b) { return a != b; }},
      {"lt", [](auto& a, auto& b) { return lt(a, b); }, [](auto& a, auto& s) { return lt(a, s); },
       [](long double a, long double b) { return a < b; }},
      {"le", [](auto& a, auto& b) { return le(a, b); }, [](auto& a, auto& s) { return le(a, s); },
       [](long double a, long double b) { return a <= b; }},
      {"gt", [](auto& a, auto& b) { return gt(a, b); }, [](auto& a, auto& s) { return gt(a, s); },
       [](long double a, long double b) { return a > b; }},
      {"ge", [](auto& a, auto& b) { return ge(a, b); }, [](auto& a, auto& s) { return ge(a, s); },
       [](long double a, long double b) { return a >= b; }},
  };
}

TEST(ElementwiseCompare, ComparisonsForAllDtypesSizesAndLayouts) {
  for (const auto& c : compare_cases()) {
    for (DType dtype : real_dtypes()) {
      for (int64_t n : kSizes) {
        for (Layout layout : kLayouts) {
          if (n > 1000 && layout != Layout::Contiguous) continue;
          SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n) +
                       " " + layout_name(layout));
          const Tensor a = sample(dtype, n, 1, layout), b = sample(dtype, n, 2, layout);
          const std::vector<bool> got = to_bools(c.op(a, b));
          const auto va = stored_values(a), vb = stored_values(b);
          std::vector<bool> want(va.size());
          for (size_t i = 0; i < va.size(); ++i) want[i] = c.ref(va[i], vb[i]);
          EXPECT_EQ(got, want);
          // Against a Scalar (exactly representable in every dtype here).
          const std::vector<bool> got_s = to_bools(c.op_scalar(a, Scalar(int64_t{1})));
          for (size_t i = 0; i < va.size(); ++i) want[i] = c.ref(va[i], 1);
          EXPECT_EQ(got_s, want);
        }
      }
    }
  }
}

TEST(ElementwiseCompare, MixedDtypesCompareInThePromotedDtype) {
  // int32 vs float32: both as float32 (16777217 rounds to 16777216, so they are equal).
  const Tensor i = make_int_tensor({16777217, 3}, DType::Int32);
  const Tensor f = make_tensor({16777216, 2.5}, DType::Float32);
  EXPECT_EQ(to_bools(eq(i, f)), (std::vector<bool>{true, false}));
  EXPECT_EQ(to_bools(gt(i, f)), (std::vector<bool>{false, true}));
  // Broadcast: [3, 1] vs [1, 2].
  const Tensor col = make_tensor({1, 2, 3}, DType::Float16).view({3, 1});
  const Tensor row = make_int_tensor({2, 3}, DType::Int8).view({1, 2});
  const Tensor lt_out = lt(col, row);
  EXPECT_EQ(lt_out.sizes(), (Shape{3, 2}));
  EXPECT_EQ(to_bools(lt_out), (std::vector<bool>{true, true, false, true, false, false}));
}

TEST(ElementwiseCompare, UnsignedAndWrappedScalarsPinned) {
  // uint64 compares as unsigned: 2^63 > 1.
  const Tensor big = make_int_tensor({static_cast<int64_t>(uint64_t{1} << 63), 1}, DType::UInt64);
  const Tensor one = make_int_tensor({1, 1}, DType::UInt64);
  EXPECT_EQ(to_bools(gt(big, one)), (std::vector<bool>{true, false}));
  EXPECT_EQ(to_bools(gt(big, Scalar(uint64_t{1} << 62))), (std::vector<bool>{true, false}));
  // A Scalar takes the tensor's dtype first, as in PyTorch: -1 becomes uint8 255 and
  // 1000 becomes int8 -24 (pytorch/pytorch#101653, #114679).
  const Tensor u8 = make_int_tensor({0, 200, 255}, DType::UInt8);
  EXPECT_EQ(to_bools(gt(u8, -1)), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(to_bools(eq(u8, -1)), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(to_bools(lt(make_int_tensor({1}, DType::Int8), 1000)), (std::vector<bool>{false}));
  // A float Scalar promotes an integer tensor to float32 instead.
  EXPECT_EQ(to_bools(gt(u8, -1.0)), (std::vector<bool>{true, true, true}));
  // ... and is rounded to a bf16 tensor's dtype: bf16(0.1) == 0.1.
  EXPECT_EQ(to_bools(eq(make_tensor({0.1}, DType::BFloat16), 0.1)), (std::vector<bool>{true}));
  // NaN is unequal to everything, itself included.
  const Tensor nan = make_tensor({kNaN}, DType::Float32);
  EXPECT_EQ(to_bools(eq(nan, nan)), (std::vector<bool>{false}));
  EXPECT_EQ(to_bools(ne(nan, nan)), (std::vector<bool>{true}));
  EXPECT_EQ(to_bools(le(nan, kInf)), (std::vector<bool>{false}));
  // -0.0 == 0.0.
  EXPECT_EQ(to_bools(eq(make_tensor({-0.0}, DType::Float64), 0.0)), (std::vector<bool>{true}));
}

TEST(ElementwiseCompare, ComplexEqualityOnly) {
  const Tensor a = make_complex_tensor({{1, 2}, {1, 2}, {kNaN, 0}}, DType::Complex64);
  const Tensor b = make_complex_tensor({{1, 2}, {1, -2}, {kNaN, 0}}, DType::Complex128);
  EXPECT_EQ(to_bools(eq(a, b)), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(to_bools(ne(a, b)), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(to_bools(eq(a, std::complex<double>(1, 2))), (std::vector<bool>{true, true, false}));
  expect_error([&] { lt(a, b); }, ErrorKind::NotImplemented, "lt: not implemented for complex tensors");
  expect_error([&] { ge(a, 1.0); }, ErrorKind::NotImplemented, "ge: not implemented for complex");
}

TEST(ElementwiseCompare, IsNanIsInfIsFinite) {
  const std::vector<double> v = {kNaN, kInf, -kInf, 0.0, -1.5, 1e30};
  for (DType dtype : kFloatDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = make_tensor(v, dtype, Layout::Strided);
    const auto stored = to_doubles(x);  // e4m3fn has no inf: +-inf and 1e30 saturate to +-448
    std::vector<bool> want_nan, want_inf, want_finite;
    for (double s : stored) {
      want_nan.push_back(std::isnan(s));
      want_inf.push_back(std::isinf(s));
      want_finite.push_back(std::isfinite(s));
    }
    EXPECT_EQ(to_bools(isnan(x)), want_nan);
    EXPECT_EQ(to_bools(isinf(x)), want_inf);
    EXPECT_EQ(to_bools(isfinite(x)), want_finite);
  }
  for (DType dtype : {DType::Int32, DType::UInt8, DType::Bool}) {
    const Tensor x = make_int_tensor({0, 1, 1}, dtype);
    EXPECT_EQ(to_bools(isnan(x)), (std::vector<bool>{false, false, false}));
    EXPECT_EQ(to_bools(isinf(x)), (std::vector<bool>{false, false, false}));
    EXPECT_EQ(to_bools(isfinite(x)), (std::vector<bool>{true, true, true}));
  }
  const Tensor c = make_complex_tensor({{kNaN, 0}, {0, kInf}, {1, 2}, {kInf, kNaN}}, DType::Complex128);
  EXPECT_EQ(to_bools(isnan(c)), (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(to_bools(isinf(c)), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(to_bools(isfinite(c)), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(isnan(zeros({2, 0})).sizes(), (Shape{2, 0}));
}

// ---------------------------------------------------------------- logical

TEST(ElementwiseCompare, LogicalOps) {
  for (DType dtype : real_dtypes()) {
    for (int64_t n : {int64_t{0}, int64_t{9}, int64_t{1000}, int64_t{100003}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      const Tensor a = sample(dtype, n, 3, Layout::Strided), b = sample(dtype, n, 4);
      const auto va = stored_values(a), vb = stored_values(b);
      std::vector<bool> want_and, want_or, want_xor, want_not;
      for (size_t i = 0; i < va.size(); ++i) {
        const bool x = va[i] != 0, y = vb[i] != 0;  // NaN counts as true
        want_and.push_back(x && y);
        want_or.push_back(x || y);
        want_xor.push_back(x != y);
        want_not.push_back(!x);
      }
      EXPECT_EQ(to_bools(logical_and(a, b)), want_and);
      EXPECT_EQ(to_bools(logical_or(a, b)), want_or);
      EXPECT_EQ(to_bools(logical_xor(a, b)), want_xor);
      EXPECT_EQ(to_bools(logical_not(a)), want_not);
    }
  }
  // Mixed dtypes and complex: nonzero is true.
  const Tensor c = make_complex_tensor({{0, 0}, {0, 1}, {kNaN, 0}}, DType::Complex64);
  const Tensor i = make_int_tensor({5, 0, 1}, DType::Int16);
  EXPECT_EQ(to_bools(logical_and(c, i)), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(to_bools(logical_not(c)), (std::vector<bool>{true, false, false}));
}

// ---------------------------------------------------------------- bitwise

TEST(ElementwiseCompare, BitwiseOps) {
  for (DType dtype : kIntDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<int64_t> va, vb;
    for (int64_t i = 0; i < 1000; ++i) {
      va.push_back(i * 2654435761LL ^ (i << 40));
      vb.push_back(i * 40503LL - 300000);
    }
    const Tensor a = make_int_tensor(va, dtype), b = make_int_tensor(vb, dtype);
    const auto sa = to_int64s(a), sb = to_int64s(b);
    std::vector<int64_t> want_and, want_or, want_xor, want_not;
    for (size_t i = 0; i < sa.size(); ++i) {
      want_and.push_back(sa[i] & sb[i]);
      want_or.push_back(sa[i] | sb[i]);
      want_xor.push_back(sa[i] ^ sb[i]);
      want_not.push_back(~sa[i]);
    }
    // Bitwise results of the sign-extended values, wrapped back into the dtype.
    auto wrapped = [&](const std::vector<int64_t>& v) { return to_int64s(make_int_tensor(v, dtype)); };
    EXPECT_EQ(to_int64s(bitwise_and(a, b)), wrapped(want_and));
    EXPECT_EQ(to_int64s(bitwise_or(a, b)), wrapped(want_or));
    EXPECT_EQ(to_int64s(bitwise_xor(a, b)), wrapped(want_xor));
    EXPECT_EQ(to_int64s(bitwise_not(a)), wrapped(want_not));
    EXPECT_EQ(bitwise_and(a, b).dtype(), dtype);
    std::vector<int64_t> want_s;
    for (int64_t x : sa) want_s.push_back(x & 0x5A);
    EXPECT_EQ(to_int64s(bitwise_and(a, 0x5A)), wrapped(want_s));
  }
  const Tensor t = make_int_tensor({0, 0, 1, 1}, DType::Bool);
  const Tensor u = make_int_tensor({0, 1, 0, 1}, DType::Bool);
  EXPECT_EQ(to_int64s(bitwise_and(t, u)), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(to_int64s(bitwise_or(t, u)), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(to_int64s(bitwise_xor(t, true)), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(bitwise_xor(t, true).dtype(), DType::Bool);
  EXPECT_EQ(bitwise_or(t, 2).dtype(), DType::Int64);
}

TEST(ElementwiseCompare, Shifts) {
  // PyTorch's rules: a negative or too-large shift gives 0 to the left and the sign
  // fill to the right.
  const Tensor a = make_int_tensor({1, -8, 5, -5, 3, -3, 1}, DType::Int8);
  const Tensor s = make_int_tensor({3, 1, 8, 9, -1, -1, 7}, DType::Int8);
  EXPECT_EQ(to_int64s(bitwise_left_shift(a, s)), (std::vector<int64_t>{8, -16, 0, 0, 0, 0, -128}));
  EXPECT_EQ(to_int64s(bitwise_right_shift(a, s)), (std::vector<int64_t>{0, -4, 0, -1, 0, -1, 0}));
  const Tensor u = make_int_tensor({0x80, 0xFF, 1}, DType::UInt8);
  EXPECT_EQ(to_int64s(bitwise_right_shift(u, 7)), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(to_int64s(bitwise_right_shift(u, 8)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(to_int64s(bitwise_left_shift(u, 1)), (std::vector<int64_t>{0, 0xFE, 2}));
  const Tensor big = make_int_tensor({1, -1}, DType::Int64);
  EXPECT_EQ(to_int64s(bitwise_left_shift(big, 63)), (std::vector<int64_t>{INT64_MIN, INT64_MIN}));
  EXPECT_EQ(to_int64s(bitwise_right_shift(big, 64)), (std::vector<int64_t>{0, -1}));
  const Tensor u64 = make_int_tensor({-1}, DType::UInt64);
  EXPECT_EQ(static_cast<uint64_t>(to_int64s(bitwise_right_shift(u64, 63))[0]), 1u);
}

TEST(ElementwiseCompare, BitwiseErrors) {
  const Tensor f = make_tensor({1.0}, DType::Float32);
  const Tensor b = make_int_tensor({1}, DType::Bool);
  const Tensor i = make_int_tensor({1}, DType::Int32);
  expect_error([&] { bitwise_and(f, f); }, ErrorKind::Type, "bitwise_and: expected bool or integer tensors, got float32");
  expect_error([&] { bitwise_or(i, 1.5); }, ErrorKind::Type, "bitwise_or: expected bool or integer tensors, got float32");
  expect_error([&] { bitwise_xor(make_complex_tensor({{1, 0}}, DType::Complex64), i); }, ErrorKind::Type,
               "got complex64");
  expect_error([&] { bitwise_left_shift(b, b); }, ErrorKind::Type,
               "bitwise_left_shift: expected integer tensors, got bool");
  expect_error([&] { bitwise_right_shift(f, 1); }, ErrorKind::Type, "bitwise_right_shift: expected integer tensors");
}

// ---------------------------------------------------------------- where

TEST(ElementwiseCompare, WhereForAllDtypesAndLayouts) {
  std::vector<DType> dtypes = real_dtypes();
  for (DType dtype : dtypes) {
    for (int64_t n : kSizes) {
      for (Layout layout : kLayouts) {
        if (n > 1000 && layout != Layout::Contiguous) continue;
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n) + " " + layout_name(layout));
        const Tensor a = sample(dtype, n, 5, layout), b = sample(dtype, n, 6, layout);
        std::vector<double> cv(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) cv[size_t(i)] = (i * 5 % 7) < 3 ? 1 : 0;
        const Tensor cond = make_tensor(cv, DType::Bool, layout);
        const Tensor out = where(cond, a, b);
        ASSERT_EQ(out.dtype(), dtype);
        const auto va = stored_values(a), vb = stored_values(b), got = stored_values(out);
        for (size_t i = 0; i < got.size(); ++i) {
          const long double want = cv[i] != 0 ? va[i] : vb[i];
          EXPECT_TRUE(got[i] == want || (std::isnan(got[i]) && std::isnan(want))) << i;
        }
      }
    }
  }
}

TEST(ElementwiseCompare, WhereScalarsPromotionAndBroadcast) {
  const Tensor cond = make_int_tensor({1, 0, 1}, DType::Bool);
  const Tensor i = make_int_tensor({1, 2, 3}, DType::Int32);
  EXPECT_EQ(where(cond, i, 0.5).dtype(), DType::Float32);
  EXPECT_EQ(to_doubles(where(cond, i, 0.5)), (std::vector<double>{1, 0.5, 3}));
  EXPECT_EQ(where(cond, int64_t{7}, i).dtype(), DType::Int32);
  EXPECT_EQ(to_int64s(where(cond, int64_t{7}, i)), (std::vector<int64_t>{7, 2, 7}));
  EXPECT_EQ(where(cond, 1.0, int64_t{0}).dtype(), DType::Float32);
  EXPECT_EQ(where(cond, int64_t{1}, int64_t{0}).dtype(), DType::Int64);
  EXPECT_EQ(where(cond, i, make_tensor({0.25}, DType::Float64)).dtype(), DType::Float64);
  // uint8 conditions: nonzero is true.
  const Tensor u8 = make_int_tensor({2, 0, 255}, DType::UInt8);
  EXPECT_EQ(to_int64s(where(u8, i, int64_t{-1})), (std::vector<int64_t>{1, -1, 3}));
  // cond [3, 1], a [1, 4], b [] -> [3, 4].
  const Tensor col = make_int_tensor({1, 0, 1}, DType::Bool).view({3, 1});
  const Tensor row = make_tensor({1, 2, 3, 4}, DType::Float16).view({1, 4});
  const Tensor zero = make_tensor({0}, DType::Float16).view({});
  const Tensor out = where(col, row, zero);
  EXPECT_EQ(out.sizes(), (Shape{3, 4}));
  EXPECT_EQ(to_doubles(out), (std::vector<double>{1, 2, 3, 4, 0, 0, 0, 0, 1, 2, 3, 4}));
  // Complex (16-byte elements).
  const Tensor c = make_complex_tensor({{1, -1}, {2, -2}, {3, -3}}, DType::Complex128);
  const auto cw = to_complexes(where(cond, c, std::complex<double>(0, 9)));
  EXPECT_EQ(cw[1], std::complex<double>(0, 9));
  EXPECT_EQ(cw[2], std::complex<double>(3, -3));
}

TEST(ElementwiseCompare, WhereErrors) {
  const Tensor i = make_int_tensor({1, 2, 3}, DType::Int32);
  expect_error([&] { where(make_tensor({1, 0, 1}, DType::Float32), i, i); }, ErrorKind::Type,
               "where: expected condition to be a boolean tensor, but got a tensor with dtype float32");
  expect_error([&] { where(make_int_tensor({1, 0}, DType::Bool), i, i); }, ErrorKind::Runtime,
               "must match the size of tensor b");
  expect_error([&] { where(make_int_tensor({1}, DType::Bool), make_tensor({1}, DType::Float8_e5m2), i); },
               ErrorKind::Type, "Promotion for Float8 Types is not supported");
}

// ---------------------------------------------------------------- clamp

long double clamp_ref(long double x, std::optional<long double> lo, std::optional<long double> hi) {
  if (std::isnan(x) || (lo && std::isnan(*lo)) || (hi && std::isnan(*hi))) return kNaN;
  if (lo) x = std::max(x, *lo);
  if (hi) x = std::min(x, *hi);
  return x;
}

TEST(ElementwiseCompare, ClampScalarBoundsForAllDtypes) {
  std::vector<DType> dtypes = kFloatDtypes;
  dtypes.insert(dtypes.end(), kIntDtypes.begin(), kIntDtypes.end());
  for (DType dtype : dtypes) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      const Tensor x = sample(dtype, n, 7, Layout::Strided);
      const auto vx = stored_values(x);
      const bool u = is_unsigned(dtype);
      const int64_t lo = u ? 1 : -2, hi = 3;
      struct Case {
        Tensor out;
        std::optional<long double> lo, hi;
      };
      const std::vector<Case> cases = {
          {clamp(x, Scalar(lo), Scalar(hi)), lo, hi},
          {clamp_min(x, Scalar(lo)), lo, std::nullopt},
          {clamp_max(x, Scalar(hi)), std::nullopt, hi},
          {clamp(x, Scalar(hi), Scalar(lo)), hi, lo},  // min > max: everything becomes max
      };
      for (const auto& c : cases) {
        ASSERT_EQ(c.out.dtype(), dtype);
        const auto got = stored_values(c.out);
        for (size_t i = 0; i < got.size(); ++i) {
          const long double want = clamp_ref(vx[i], c.lo, c.hi);
          EXPECT_TRUE(got[i] == want || (std::isnan(got[i]) && std::isnan(want))) << vx[i];
        }
      }
    }
  }
}

TEST(ElementwiseCompare, ClampTensorBoundsBroadcastAndPromote) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int32, DType::UInt8}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = sample(dtype, 12, 8).view({3, 4});
    const Tensor lo = sample(dtype, 4, 9).view({1, 4});
    const Tensor hi = sample(dtype, 3, 10).view({3, 1});
    const Tensor out = clamp(x, std::optional<Tensor>(lo), std::optional<Tensor>(hi));
    ASSERT_EQ(out.sizes(), (Shape{3, 4}));
    const auto vx = stored_values(x), vl = stored_values(lo), vh = stored_values(hi), got = stored_values(out);
    const auto got_min = stored_values(clamp_min(x, lo)), got_max = stored_values(clamp_max(x, hi));
    for (size_t r = 0; r < 3; ++r) {
      for (size_t c = 0; c < 4; ++c) {
        const size_t i = r * 4 + c;
        const long double want = clamp_ref(vx[i], vl[c], vh[r]);
        EXPECT_TRUE(got[i] == want || (std::isnan(got[i]) && std::isnan(want))) << i;
        const long double want_min = clamp_ref(vx[i], vl[c], std::nullopt);
        EXPECT_TRUE(got_min[i] == want_min || (std::isnan(got_min[i]) && std::isnan(want_min))) << i;
        const long double want_max = clamp_ref(vx[i], std::nullopt, vh[r]);
        EXPECT_TRUE(got_max[i] == want_max || (std::isnan(got_max[i]) && std::isnan(want_max))) << i;
      }
    }
  }
  // Promotion: an int tensor clamped by a float bound is float32; a bool tensor by
  // int bounds is int64.
  const Tensor i = make_int_tensor({-3, 0, 7}, DType::Int32);
  const Tensor ci = clamp(i, Scalar(-0.5), std::nullopt);
  EXPECT_EQ(ci.dtype(), DType::Float32);
  EXPECT_EQ(to_doubles(ci), (std::vector<double>{-0.5, 0, 7}));
  const Tensor b = make_int_tensor({0, 1}, DType::Bool);
  EXPECT_EQ(clamp(b, Scalar(int64_t{1}), std::nullopt).dtype(), DType::Int64);
  EXPECT_EQ(to_int64s(clamp(b, Scalar(int64_t{1}), std::nullopt)), (std::vector<int64_t>{1, 1}));
}

// An integer bound converts like c10's Scalar::to<T>(): a negative bound of an unsigned
// tensor wraps (-1 is uint8 255), so clamp_min(uint8, -1) is 255 everywhere, as in PyTorch.
TEST(ElementwiseCompare, ClampUnsignedNegativeBoundWraps) {
  const Tensor u = make_int_tensor({0, 7, 255}, DType::UInt8);
  EXPECT_EQ(to_int64s(clamp_min(u, Scalar(int64_t{-1}))), (std::vector<int64_t>{255, 255, 255}));
  EXPECT_EQ(to_int64s(clamp_max(u, Scalar(int64_t{-255}))), (std::vector<int64_t>{0, 1, 1}));
}

TEST(ElementwiseCompare, ClampNaNPinned) {
  const Tensor x = make_tensor({kNaN, -1, 5}, DType::Float32);
  // A NaN input stays NaN.
  const auto a = to_doubles(clamp(x, Scalar(0.0), Scalar(1.0)));
  EXPECT_TRUE(std::isnan(a[0]));
  EXPECT_EQ(a[1], 0.0);
  EXPECT_EQ(a[2], 1.0);
  // Both Scalar bounds given and one NaN: NaN everywhere (PyTorch fills the result).
  for (double v : to_doubles(clamp(x, Scalar(kNaN), Scalar(1.0)))) EXPECT_TRUE(std::isnan(v));
  // A lone NaN Scalar bound is ignored, as PyTorch's CPU clamp_min/clamp_max kernels do.
  const auto lone = to_doubles(clamp_min(x, Scalar(kNaN)));
  EXPECT_TRUE(std::isnan(lone[0]));
  EXPECT_EQ(lone[1], -1.0);
  EXPECT_EQ(lone[2], 5.0);
  // A NaN in a tensor bound propagates.
  const auto t = to_doubles(clamp_max(x, make_tensor({kNaN, kNaN, 2}, DType::Float32)));
  EXPECT_TRUE(std::isnan(t[0]) && std::isnan(t[1]));
  EXPECT_EQ(t[2], 2.0);
}

TEST(ElementwiseCompare, ClampAndMaxMinOnEachSimdTarget) {
  for_each_simd_target([] {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      for (int64_t n : kTargetSizes) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
        const Tensor x = sample(dtype, n, 11), lo = sample(dtype, n, 12), hi = sample(dtype, n, 13);
        const auto vx = stored_values(x), vl = stored_values(lo), vh = stored_values(hi);
        const auto got = stored_values(clamp(x, std::optional<Tensor>(lo), std::optional<Tensor>(hi)));
        const auto got_max = stored_values(maximum(x, lo));
        for (size_t i = 0; i < got.size(); ++i) {
          const long double want = clamp_ref(vx[i], vl[i], vh[i]);
          EXPECT_TRUE(got[i] == want || (std::isnan(got[i]) && std::isnan(want))) << i;
          const long double want_max = clamp_ref(vx[i], vl[i], std::nullopt);
          EXPECT_TRUE(got_max[i] == want_max || (std::isnan(got_max[i]) && std::isnan(want_max))) << i;
        }
      }
    }
  });
}

TEST(ElementwiseCompare, ClampErrors) {
  const Tensor f = make_tensor({1.0}, DType::Float32);
  expect_error([&] { clamp(f, std::optional<Scalar>(), std::optional<Scalar>()); }, ErrorKind::Runtime,
               "torch.clamp: At least one of 'min' or 'max' must not be None");
  expect_error([&] { clamp(f, std::optional<Tensor>(), std::optional<Tensor>()); }, ErrorKind::Runtime,
               "At least one of 'min' or 'max' must not be None");
  const Tensor b = make_int_tensor({1}, DType::Bool);
  expect_error([&] { clamp(b, Scalar(false), Scalar(true)); }, ErrorKind::Type, "clamp: not supported for bool results");
  expect_error([&] { clamp_min(make_complex_tensor({{1, 1}}, DType::Complex64), Scalar(0.0)); },
               ErrorKind::NotImplemented, "clamp: not implemented for complex");
  expect_error([&] { clamp_min(make_int_tensor({1}, DType::UInt8), Scalar(int64_t{-256})); }, ErrorKind::Runtime,
               "value cannot be converted to type uint8 without overflow: -256");
  expect_error([&] { clamp_max(make_int_tensor({1}, DType::Int8), Scalar(int64_t{128})); }, ErrorKind::Runtime,
               "value cannot be converted to type int8 without overflow: 128");
  expect_error([&] {
    clamp(make_tensor({1, 2, 3}, DType::Float32), std::optional<Tensor>(make_tensor({1, 2}, DType::Float32)),
          std::nullopt);
  },
               ErrorKind::Runtime, "must match the size");
}

}  // namespace
}  // namespace kiln
