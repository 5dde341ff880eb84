// unique and unique_consecutive against a plain reference (std::sort and a walk over
// runs) on every real dtype class, with inverse indices and counts, NaN, empty and 0-dim
// inputs, non-contiguous inputs, the dim= form and PyTorch's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "autograd_test_util.h"
#include "kiln/error.h"
#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/unique.h"
#include "test_util.h"

using namespace kiln;

namespace {

using kiln::testing::expect_error;

std::vector<double> values_of(const Tensor& t) {
  const Tensor flat = t.to(DType::Float64).contiguous().reshape({-1});
  return std::vector<double>(flat.data<double>(), flat.data<double>() + flat.numel());
}
std::vector<int64_t> ints_of(const Tensor& t) {
  const Tensor flat = t.contiguous().reshape({-1});
  return std::vector<int64_t>(flat.data<int64_t>(), flat.data<int64_t>() + flat.numel());
}

// Equal as PyTorch's unique compares: NaN equals nothing.
bool same(double a, double b) { return a == b; }

// The reference: sort (NaN last), then one value per run of equal neighbours.
struct Reference {
  std::vector<double> values;
  std::vector<int64_t> inverse, counts;
};
Reference reference(const std::vector<double>& in, bool consecutive) {
  std::vector<double> sorted = in;
  if (!consecutive) {
    std::stable_sort(sorted.begin(), sorted.end(), [](double a, double b) {
      if (std::isnan(a)) return false;
      return std::isnan(b) || a < b;
    });
  }
  Reference r;
  std::vector<int64_t> run_of(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i == 0 || !same(sorted[i], sorted[i - 1])) {
      r.values.push_back(sorted[i]);
      r.counts.push_back(0);
    }
    r.counts.back() += 1;
    run_of[i] = static_cast<int64_t>(r.values.size()) - 1;
  }
  if (consecutive) {
    r.inverse = run_of;
  } else {
    // Each input element maps to the run of its value (NaN: the NaN runs in input order).
    int64_t nan_seen = 0;
    const int64_t first_nan = static_cast<int64_t>(std::count_if(in.begin(), in.end(), [](double v) {
      return !std::isnan(v);
    }));
    for (double v : in) {
      if (std::isnan(v)) {
        r.inverse.push_back(run_of[first_nan + nan_seen++]);
      } else {
        const auto it = std::find(sorted.begin(), sorted.end(), v);
        r.inverse.push_back(run_of[it - sorted.begin()]);
      }
    }
  }
  return r;
}

void expect_matches(const UniqueResult& got, const Tensor& input, bool consecutive) {
  const Reference want = reference(values_of(input), consecutive);
  ASSERT_EQ(got.values.dim(), 1);
  ASSERT_EQ(got.values.dtype(), input.dtype());
  const std::vector<double> values = values_of(got.values);
  ASSERT_EQ(values.size(), want.values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(want.values[i])) {
      EXPECT_TRUE(std::isnan(values[i])) << i;
    } else {
      EXPECT_EQ(values[i], want.values[i]) << i;
    }
  }
  ASSERT_EQ(got.inverse_indices.sizes(), input.sizes());
  ASSERT_EQ(got.inverse_indices.dtype(), DType::Int64);
  EXPECT_EQ(ints_of(got.inverse_indices), want.inverse);
  ASSERT_EQ(got.counts.dtype(), DType::Int64);
  EXPECT_EQ(ints_of(got.counts), want.counts);
}

// Small integers with many repeats, in `dt`.
Tensor repeated_values(const Shape& s, DType dt, uint64_t seed) {
  Generator gen(seed);
  return randint(0, dt == DType::Bool ? 2 : 7, s, DType::Int64, &gen).to(dt);
}

}  // namespace

TEST(Unique, MatchesReferenceOnEveryDtypeClass) {
  for (DType dt : {DType::Bool, DType::UInt8, DType::Int8, DType::Int32, DType::Int64, DType::UInt64, DType::Float16,
                   DType::BFloat16, DType::Float32, DType::Float64, DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    SCOPED_TRACE(dtype_name(dt));
    for (const Shape& s : std::vector<Shape>{{1}, {15}, {16}, {17}, {3, 11}, {2, 3, 4}}) {
      const Tensor x = repeated_values(s, dt, 3);
      expect_matches(unique(x, true, true, true), x, false);
      expect_matches(unique_consecutive(x, true, true), x, true);
    }
  }
}

TEST(Unique, FloatsNanSignedZeroAndInfinities) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor x = Tensor::empty({9}, DType::Float64);
  const double data[] = {2.0, nan, -inf, 0.0, inf, nan, -0.0, 2.0, -1.5};
  std::copy(data, data + 9, x.data<double>());
  const UniqueResult r = unique(x, true, true, true);
  expect_matches(r, x, false);
  // Two NaN values, each its own (PyTorch; numpy would merge them).
  EXPECT_EQ(r.values.numel(), 7);
  expect_matches(unique_consecutive(x.to(DType::Float32), true, true), x.to(DType::Float32), true);
}

TEST(Unique, EdgeSizesLayoutsAndOptionalOutputs) {
  // Empty, 0-dim, transposed and expanded inputs.
  for (const Tensor& x : {zeros({0}), zeros({2, 0, 3}), scalar_tensor(Scalar(4.0)),
                          repeated_values({5, 4}, DType::Float32, 1).t(),
                          repeated_values({1, 6}, DType::Int32, 2).expand({3, 6})}) {
    SCOPED_TRACE(x.shape_str());
    expect_matches(unique(x, true, true, true), x, false);
    expect_matches(unique_consecutive(x, true, true), x, true);
  }
  // Inverse and counts only when asked for.
  const UniqueResult plain = unique(repeated_values({10}, DType::Int64, 4));
  EXPECT_TRUE(plain.values.defined());
  EXPECT_FALSE(plain.inverse_indices.defined());
  EXPECT_FALSE(plain.counts.defined());
  const UniqueResult counted = unique(repeated_values({10}, DType::Int64, 4), false, false, true);
  EXPECT_FALSE(counted.inverse_indices.defined());
  EXPECT_EQ(sum(counted.counts).item().to_int64(), 10);
}

TEST(Unique, AlongADimSortsSlicesLexicographically) {
  // Rows of a [6, 3] matrix, with repeats; the same along dim 1 of its transpose.
  Tensor m = Tensor::empty({6, 3}, DType::Int64);
  const int64_t rows[6][3] = {{1, 2, 3}, {0, 5, 1}, {1, 2, 3}, {1, 0, 9}, {0, 5, 1}, {1, 2, 2}};
  for (int i = 0; i < 6; ++i) std::copy(rows[i], rows[i] + 3, m.data<int64_t>() + 3 * i);
  const UniqueResult r = unique(m, true, true, true, 0);
  ASSERT_EQ(r.values.sizes(), (Shape{4, 3}));
  EXPECT_EQ(ints_of(r.values), (std::vector<int64_t>{0, 5, 1, 1, 0, 9, 1, 2, 2, 1, 2, 3}));
  EXPECT_EQ(ints_of(r.inverse_indices), (std::vector<int64_t>{3, 0, 3, 1, 0, 2}));
  EXPECT_EQ(ints_of(r.counts), (std::vector<int64_t>{2, 1, 1, 2}));
  const UniqueResult t = unique(m.t(), true, true, true, -1);
  ASSERT_EQ(t.values.sizes(), (Shape{3, 4}));
  EXPECT_EQ(ints_of(t.values.t()), ints_of(r.values));
  EXPECT_EQ(ints_of(t.inverse_indices), ints_of(r.inverse_indices));
  // Consecutive: rows 0..5 have no equal neighbours but (0, 2) are apart.
  const UniqueResult c = unique_consecutive(m, true, true, 0);
  EXPECT_EQ(c.values.size(0), 6);
  EXPECT_EQ(ints_of(c.counts), (std::vector<int64_t>(6, 1)));
  // Slices of a 3-D tensor along the middle dim.
  const Tensor x = repeated_values({2, 8, 2}, DType::Bool, 9);
  const UniqueResult s = unique(x, true, true, true, 1);
  EXPECT_EQ(s.values.size(0), 2);
  EXPECT_EQ(s.values.size(2), 2);
  EXPECT_EQ(sum(s.counts).item().to_int64(), 8);
  // Each original slice equals the unique slice its inverse index names.
  for (int64_t i = 0; i < 8; ++i) {
    const Tensor a = x.select(1, i), b = s.values.select(1, s.inverse_indices.at({i}).to_int64());
    EXPECT_EQ(sum(ne(a, b)).item().to_int64(), 0) << i;
  }
}

TEST(Unique, DimEdgeSizesAndErrors) {
  const UniqueResult empty = unique(zeros({0, 3}), true, true, true, 0);
  EXPECT_EQ(empty.values.sizes(), (Shape{0, 3}));
  EXPECT_EQ(empty.inverse_indices.numel(), 0);
  expect_error([] { unique(zeros({0, 0}), true, false, false, 0); }, ErrorKind::Runtime,
               "Number of zero sized dimensions is more than one, so unique cannot be applied");
  expect_error([] { unique(zeros({3, 0}), true, false, false, 0); }, ErrorKind::Runtime,
               "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  expect_error([] { unique(scalar_tensor(Scalar(1.0)), true, false, false, 0); }, ErrorKind::Index,
               "Dimension specified as 0 but tensor has no dimensions");
  expect_error([] { unique(zeros({2, 2}), true, false, false, 2); }, ErrorKind::Index, "out of range");
  expect_error([] { unique(zeros({2}, DType::Complex64)); }, ErrorKind::Runtime,
               "\"unique\" not implemented for 'ComplexFloat'");
}

TEST(Unique, ConsecutiveTakesComplex) {
  Tensor x = Tensor::empty({4}, DType::Complex128);
  const std::complex<double> data[] = {{1, 1}, {1, 1}, {1, -1}, {1, 1}};
  std::copy(data, data + 4, x.data<std::complex<double>>());
  const UniqueResult r = unique_consecutive(x, true, true);
  EXPECT_EQ(r.values.numel(), 3);
  EXPECT_EQ(ints_of(r.counts), (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(ints_of(r.inverse_indices), (std::vector<int64_t>{0, 0, 1, 2}));
}

TEST(Unique, ValuesCarryTheGradientOfTheFirstOfEachRun) {
  // unique's values are a selection of the sorted input, so the gradient lands on one
  // element per run: the first of equal values in input order (stable sort).
  Tensor x = Tensor::empty({5}, DType::Float64);
  const double data[] = {3.0, 1.0, 3.0, 2.0, 1.0};
  std::copy(data, data + 5, x.data<double>());
  x.requires_grad_(true);
  const UniqueResult r = unique(x);
  autograd::backward({sum(mul(r.values, r.values.detach()))});
  EXPECT_EQ(values_of(x.grad()), (std::vector<double>{3.0, 1.0, 0.0, 2.0, 0.0}));
}
