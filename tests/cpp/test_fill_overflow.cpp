// The checked conversion of a fill value (PyTorch's c10::checked_convert): full, fill_,
// scalar_tensor and masked_fill refuse a number the dtype cannot hold instead of
// wrapping it, at each dtype's edges. Expected values are PyTorch 1.13's.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/index.h"
#include "test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;

// Every way of writing one number into a tensor of `dt`, each returning the element.
std::vector<std::pair<std::string, std::function<Scalar(const Scalar&, DType)>>> writers() {
  return {
      {"full", [](const Scalar& v, DType dt) { return full({2}, v, dt).at({1}); }},
      {"fill_", [](const Scalar& v, DType dt) { return zeros({2}, dt).fill_(v).at({1}); }},
      {"scalar_tensor", [](const Scalar& v, DType dt) { return scalar_tensor(v, dt).item(); }},
      {"masked_fill",
       [](const Scalar& v, DType dt) { return masked_fill(zeros({2}, dt), ones({2}, DType::Bool), v).at({1}); }},
  };
}

void expect_fits(const Scalar& v, DType dt, const Scalar& want) {
  for (const auto& [name, write] : writers()) {
    SCOPED_TRACE(name + " " + v.str() + " into " + std::string(dtype_name(dt)));
    const Scalar got = write(v, dt);
    if (is_floating(dt) && std::isnan(want.to_double())) {
      EXPECT_TRUE(std::isnan(got.to_double()));
    } else if (is_floating(dt)) {
      EXPECT_EQ(got.to_double(), want.to_double());
    } else if (dt == DType::UInt64) {
      EXPECT_EQ(got.to_uint64(), want.to_uint64());
    } else {
      EXPECT_EQ(got.to_int64(), want.to_int64());
    }
  }
}

void expect_overflow(const Scalar& v, DType dt) {
  for (const auto& entry : writers()) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const auto& name = entry.first;
    const auto& write = entry.second;
    SCOPED_TRACE(name + " " + v.str() + " into " + std::string(dtype_name(dt)));
    // masked_fill reports itself as masked_fill, the rest under their own names too.
    expect_error([&] { write(v, dt); }, ErrorKind::Runtime,
                 "value cannot be converted to type " + std::string(dtype_name(dt)) + " without overflow (got " +
                     v.str());
  }
}

TEST(FillOverflow, SignedIntegerEdges) {
  struct Case {
    DType dt;
    int64_t lo, hi;
  };
  for (const Case& c : {Case{DType::Int8, -128, 127}, Case{DType::Int16, -32768, 32767},
                        Case{DType::Int32, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()}}) {
    expect_fits(Scalar(c.lo), c.dt, Scalar(c.lo));
    expect_fits(Scalar(c.hi), c.dt, Scalar(c.hi));
    expect_overflow(Scalar(c.lo - 1), c.dt);
    expect_overflow(Scalar(c.hi + 1), c.dt);
    // Floats: in range truncates; c10 compares with the bounds, so hi + 0.5 overflows.
    expect_fits(Scalar(static_cast<double>(c.hi)), c.dt, Scalar(c.hi));
    expect_fits(Scalar(-1.5), c.dt, Scalar(int64_t{-1}));
    expect_overflow(Scalar(static_cast<double>(c.hi) + 0.5), c.dt);
    expect_overflow(Scalar(static_cast<double>(c.lo) - 0.5), c.dt);
  }
  const int64_t min64 = std::numeric_limits<int64_t>::min(), max64 = std::numeric_limits<int64_t>::max();
  expect_fits(Scalar(min64), DType::Int64, Scalar(min64));
  expect_fits(Scalar(max64), DType::Int64, Scalar(max64));
  expect_overflow(Scalar(uint64_t{1} << 63), DType::Int64);  // one past, held as an unsigned Scalar
  expect_overflow(Scalar(std::ldexp(1.0, 63)), DType::Int64);
  expect_overflow(Scalar(int64_t{1} << 40), DType::Int32);  // the example
}

TEST(FillOverflow, UnsignedIntegerEdgesAndNegativesThatWrap) {
  struct Case {
    DType dt;
    uint64_t max;
  };
  for (const Case& c : {Case{DType::UInt8, 255}, Case{DType::UInt16, 65535}, Case{DType::UInt32, 4294967295u}}) {
    const auto max = static_cast<int64_t>(c.max);
    expect_fits(Scalar(int64_t{0}), c.dt, Scalar(int64_t{0}));
    expect_fits(Scalar(max), c.dt, Scalar(max));
    expect_overflow(Scalar(max + 1), c.dt);
    // c10 lets an unsigned dtype take negatives down to -max: they wrap (uint8 -1 is 255).
    expect_fits(Scalar(int64_t{-1}), c.dt, Scalar(max));
    expect_fits(Scalar(-max), c.dt, Scalar(int64_t{1}));
    expect_overflow(Scalar(-max - 1), c.dt);
    // A negative float does not wrap: -0.5 already overflows.
    expect_overflow(Scalar(-0.5), c.dt);
    expect_overflow(Scalar(static_cast<double>(max) + 0.5), c.dt);
    expect_fits(Scalar(1.5), c.dt, Scalar(int64_t{1}));
  }
  expect_overflow(Scalar(int64_t{300}), DType::UInt8);  // the example
  const uint64_t max64 = std::numeric_limits<uint64_t>::max();
  expect_fits(Scalar(max64), DType::UInt64, Scalar(max64));
  expect_fits(Scalar(std::numeric_limits<int64_t>::min()), DType::UInt64, Scalar(uint64_t{1} << 63));
  expect_overflow(Scalar(std::ldexp(1.0, 64)), DType::UInt64);
}

TEST(FillOverflow, NonFiniteFloatsNeverFitAnInteger) {
  for (DType dt : {DType::UInt8, DType::Int8, DType::Int32, DType::Int64, DType::UInt64}) {
    expect_overflow(Scalar(std::nan("")), dt);
    expect_overflow(Scalar(std::numeric_limits<double>::infinity()), dt);
    expect_overflow(Scalar(-std::numeric_limits<double>::infinity()), dt);
  }
}

TEST(FillOverflow, BoolTakesEveryNumber) {
  // c10: "converting to bool can't overflow": nonzero (NaN included) is true.
  for (const Scalar& v : {Scalar(int64_t{2}), Scalar(int64_t{-1}), Scalar(std::nan("")), Scalar(1e300),
                          Scalar(std::numeric_limits<uint64_t>::max())}) {
    expect_fits(v, DType::Bool, Scalar(int64_t{1}));
  }
  expect_fits(Scalar(0.0), DType::Bool, Scalar(int64_t{0}));
}

TEST(FillOverflow, FloatsTakeTheirFiniteRangeAndInfinities) {
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    DType dt;
    double max;     // largest finite value
    double beyond;  // a finite value past it
  };
  for (const Case& c :
       {Case{DType::Float16, 65504.0, 65505.0}, Case{DType::BFloat16, 3.3895313892515355e38, 3.39e38},
        Case{DType::Float32, static_cast<double>(std::numeric_limits<float>::max()), 1e39},
        Case{DType::Float8_e5m2, 57344.0, 57345.0}, Case{DType::Float8_e4m3fn, 448.0, 449.0}}) {
    expect_fits(Scalar(c.max), c.dt, Scalar(c.max));
    expect_fits(Scalar(-c.max), c.dt, Scalar(-c.max));
    expect_overflow(Scalar(c.beyond), c.dt);
    expect_overflow(Scalar(-c.beyond), c.dt);
    expect_fits(Scalar(std::nan("")), c.dt, Scalar(std::nan("")));
    if (c.dt == DType::Float8_e4m3fn) {
      expect_overflow(Scalar(inf), c.dt);  // it has no infinity
    } else {
      expect_fits(Scalar(inf), c.dt, Scalar(inf));
      expect_fits(Scalar(-inf), c.dt, Scalar(-inf));
    }
  }
  expect_overflow(Scalar(int64_t{70000}), DType::Float16);  // integers are checked too
  expect_fits(Scalar(int64_t{1} << 62), DType::Float32, Scalar(std::ldexp(1.0, 62)));
  expect_fits(Scalar(std::numeric_limits<double>::max()), DType::Float64,
              Scalar(std::numeric_limits<double>::max()));
  expect_fits(Scalar(inf), DType::Float64, Scalar(inf));
  // The default dtype is checked too: full((2,), 1e39) is float32.
  expect_error([] { full({2}, Scalar(1e39)); }, ErrorKind::Runtime,
               "full: value cannot be converted to type float32 without overflow (got 1e+39; float32 takes finite "
               "values up to");
}

TEST(FillOverflow, ComplexValues) {
  expect_overflow(Scalar(std::complex<double>(1, 2)), DType::Float32);
  expect_fits(Scalar(std::complex<double>(3, 0)), DType::Float32, Scalar(3.0));
  expect_error([] { full({2}, Scalar(std::complex<double>(1e39, 0)), DType::Complex64); }, ErrorKind::Runtime,
               "value cannot be converted to type complex64 without overflow");
  expect_error([] { full({2}, Scalar(std::complex<double>(1, 1e39)), DType::Complex64); }, ErrorKind::Runtime,
               "value cannot be converted to type complex64 without overflow");
  const Tensor c = full({1}, Scalar(std::complex<double>(1e39, -2)), DType::Complex128);
  EXPECT_EQ(c.item().to_complex(), std::complex<double>(1e39, -2));
}

TEST(FillOverflow, MessageNamesTheOpTheValueAndTheRange) {
  expect_error([] { full({2}, Scalar(int64_t{300}), DType::UInt8); }, ErrorKind::Runtime,
               "full: value cannot be converted to type uint8 without overflow (got 300; uint8 takes integers from "
               "-255 (negatives wrap) to 255)");
  expect_error([] { zeros({2}, DType::Int8).fill_(Scalar(int64_t{-129})); }, ErrorKind::Runtime,
               "fill_: value cannot be converted to type int8 without overflow (got -129; int8 takes integers from "
               "-128 to 127)");
  expect_error([] { ones_like(zeros({1}), DType::Float8_e4m3fn).fill_(Scalar(std::numeric_limits<double>::infinity())); },
               ErrorKind::Runtime, "float8_e4m3fn takes finite values up to 448 in magnitude and NaN (no infinities)");
  // Nothing is written by a refused fill_.
  Tensor t = full({3}, Scalar(int64_t{7}), DType::UInt8);
  expect_error([&] { t.fill_(Scalar(int64_t{256})); }, ErrorKind::Runtime, "without overflow");
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(t.at({i}).to_int64(), 7);
}

}  // namespace
}  // namespace kiln
