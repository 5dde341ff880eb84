// amax/amin, max/min (full and with a dim), argmax/argmin against a plain reference:
// NaN wins (the first NaN for the index ops), the first index among ties, -0.0 ties
// with 0.0; every real dtype, the size sweep, 3-D dims, strided and broadcast views,
// every SIMD target, and each error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "kiln/thread_pool.h"
#include "reduce_test_utils.h"

namespace kiln {
namespace {

using namespace reduce_test;

enum class Op { AMax, AMin, MaxDim, MinDim, ArgMax, ArgMin };

bool is_max(Op op) { return op == Op::AMax || op == Op::MaxDim || op == Op::ArgMax; }

// Position (within the group) of the reference result: the first NaN, else the first
// of the best values.
int64_t reference_position(const std::vector<long double>& x, const std::vector<int64_t>& group, bool max) {
  int64_t best = 0;
  for (size_t k = 0; k < group.size(); ++k) {
    const long double v = x[group[k]], b = x[group[best]];
    if (std::isnan(b)) break;
    if (std::isnan(v) || (max ? v > b : v < b)) best = static_cast<int64_t>(k);
  }
  return best;
}

// x: exact_values(input), passed in so that one input's checks share it.
void check(Op op, const Tensor& input, const std::vector<long double>& x, const DimList& dims, bool keepdim) {
  SCOPED_TRACE(input.describe() + " strides " + shape_to_string(input.strides()) + " dims " + shape_to_string(dims) +
               (keepdim ? " keepdim" : ""));
  Tensor values, indices;
  switch (op) {
    case Op::AMax: values = amax(input, dims, keepdim); break;
    case Op::AMin: values = amin(input, dims, keepdim); break;
    case Op::MaxDim: {
      const ValuesIndices r = max(input, dims[0], keepdim);
      values = r.values;
      indices = r.indices;
      break;
    }
    case Op::MinDim: {
      const ValuesIndices r = min(input, dims[0], keepdim);
      values = r.values;
      indices = r.indices;
      break;
    }
    case Op::ArgMax: indices = dims.empty() ? argmax(input, std::nullopt, keepdim) : argmax(input, dims[0], keepdim); break;
    case Op::ArgMin: indices = dims.empty() ? argmin(input, std::nullopt, keepdim) : argmin(input, dims[0], keepdim); break;
  }
  const auto reduced = input.dim() == 0 ? std::vector<bool>() : flags(input.dim(), dims);
  Shape want_shape;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (!reduced[d]) want_shape.push_back(input.sizes()[d]);
    else if (keepdim) want_shape.push_back(1);
  }
  const auto groups = reduction_groups(input.sizes(), reduced);
  std::vector<long double> got_values;
  std::vector<int64_t> got_indices;
  if (values.defined()) {
    EXPECT_EQ(values.dtype(), input.dtype());
    EXPECT_EQ(values.sizes(), want_shape);
    got_values = exact_values(values);
  }
  if (indices.defined()) {
    EXPECT_EQ(indices.dtype(), DType::Int64);
    EXPECT_EQ(indices.sizes(), want_shape);
    got_indices = to_int64s(indices);
  }
  ASSERT_TRUE(got_values.size() == groups.size() || got_indices.size() == groups.size());
  for (size_t o = 0; o < groups.size(); ++o) {
    const int64_t pos = reference_position(x, groups[o], is_max(op));
    const long double want = x[groups[o][pos]];
    if (!got_values.empty()) {
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got_values[o])) << "output " << o;
      } else {
        EXPECT_EQ(got_values[o], want) << "output " << o;
        // With an index, the value is the element at it (its zero sign included).
        if (indices.defined()) EXPECT_EQ(std::signbit(got_values[o]), std::signbit(want)) << "output " << o;
      }
    }
    if (!got_indices.empty()) EXPECT_EQ(got_indices[o], pos) << "output " << o;
  }
}

void check_all_ops(const Tensor& x, const DimList& dims, bool keepdim) {
  const auto values = exact_values(x);
  check(Op::AMax, x, values, dims, keepdim);
  check(Op::AMin, x, values, dims, keepdim);
  if (dims.size() <= 1) {
    check(Op::ArgMax, x, values, dims, keepdim);
    check(Op::ArgMin, x, values, dims, keepdim);
  }
  if (dims.size() == 1) {
    check(Op::MaxDim, x, values, dims, keepdim);
    check(Op::MinDim, x, values, dims, keepdim);
  }
}

const std::vector<DType> kRealDtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                        DType::Bool,    DType::UInt8,   DType::UInt64,  DType::Int8,
                                        DType::Int16,   DType::Int32,   DType::Int64,   DType::UInt32};

// Values drawn from a small set so that ties are everywhere.
Tensor tied(const Shape& shape, DType dtype, uint32_t seed) {
  const bool unsigned_like = is_unsigned(dtype) || dtype == DType::Bool;
  const double lo = unsigned_like ? 0.0 : -3.0, hi = dtype == DType::Bool ? 1.0 : 3.0;
  return from_doubles(random_values(shape_numel(shape), seed, lo, hi, true), shape, dtype);
}

void sweep(int64_t max_size) {
  for (DType dt : kRealDtypes) {
    for (int64_t n : kSweepSizes) {
      if (n == 0 || n > max_size) continue;
      check_all_ops(random_tensor({n}, dt, static_cast<uint32_t>(n)), {0}, false);
      check_all_ops(tied({n}, dt, static_cast<uint32_t>(n)), {}, true);
    }
  }
}

// The SIMD widths on every target; the multi-block and multi-thread sizes once.
TEST(ReduceMax, SizeSweepEveryDtype) { sweep(INT64_MAX); }
TEST(ReduceMax, SizeSweepEveryTarget) { for_each_target([] { sweep(1000); }); }

TEST(ReduceMax, ColumnWidthsOnEveryTarget) {
  for_each_target([] {
    for (DType dt : {DType::Float32, DType::Float64, DType::Int32}) {
      for (int64_t w : {8, 9, 15, 16, 17, 31, 33, 63, 65, 257}) {
        for (int64_t rows : {1, 3, 17, 130, 300}) check_all_ops(tied({rows, w}, dt, static_cast<uint32_t>(w)), {0}, false);
      }
    }
  });
}

TEST(ReduceMax, ResultsDoNotDependOnTheThreadCount) {
  const Tensor ties = tied({3000, 40}, DType::Float32, 31);
  const Tensor flat = tied({100003}, DType::Float32, 32);
  std::vector<std::vector<int64_t>> first;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const std::vector<std::vector<int64_t>> got = {to_int64s(argmax(ties, 0)), to_int64s(argmin(flat)),
                                                   to_int64s(max(ties.t(), 1).indices)};
    if (threads == 1) first = got;
    EXPECT_EQ(got, first) << threads << " threads";
  }
  set_num_threads(default_num_threads());
}

TEST(ReduceMax, NanWinsAndTheFirstNanIsReported) {
  const double nan = std::nan("");
  for_each_target([&] {
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
      for (int64_t n : {1, 2, 7, 8, 9, 17, 33, 65, 1000, 40000}) {
        for (int64_t where : {int64_t{0}, n / 3, n - 1}) {
          std::vector<double> v = random_values(n, 5);
          v[where] = nan;
          if (where + 5 < n) v[where + 5] = nan;  // a second NaN later: the first one wins
          check_all_ops(from_doubles(v, {n}, dt), {0}, false);
        }
      }
      // NaN in a column reduction and in a row reduction of a 2-D tensor.
      std::vector<double> v = random_values(40 * 300, 6);
      v[7 * 300 + 11] = nan;
      v[30 * 300 + 11] = nan;
      v[200] = nan;
      const Tensor x = from_doubles(v, {40, 300}, dt);
      check_all_ops(x, {0}, false);
      check_all_ops(x, {1}, true);
      check_all_ops(x.t(), {0}, false);
    }
  });
}

TEST(ReduceMax, TiesGiveTheFirstIndexAndSignedZerosTie) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const auto& v : std::vector<std::vector<double>>{{-0.0, 0.0}, {0.0, -0.0}, {-0.0, -0.0, 0.0}, {-1.0, -0.0}}) {
      check_all_ops(from_doubles(v, {static_cast<int64_t>(v.size())}, dt), {0}, false);
    }
    const double inf = std::numeric_limits<double>::infinity();
    check_all_ops(from_doubles({-inf, -inf, -inf}, {3}, dt), {0}, false);
    check_all_ops(from_doubles({inf, 1.0, inf}, {3}, dt), {0}, false);
  }
  for (int64_t n : {16, 40, 1000, 70000}) {
    check_all_ops(tied({n, 3}, DType::Float32, 9), {0}, false);  // one column per output
    check_all_ops(tied({5, n}, DType::Int32, 10), {1}, false);
  }
  // Columns reduced in several row spans: the earlier span keeps the tie.
  check_all_ops(tied({2000, 64}, DType::Float32, 11), {0}, false);
  check_all_ops(tied({2000, 64}, DType::Int16, 12), {0}, false);
}

TEST(ReduceMax, EveryDimOf3dTensorsAndEveryLayout) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int32, DType::UInt8, DType::Bool}) {
    for (const Shape& shape : {Shape{5, 7, 33}, Shape{3, 4, 5}, Shape{2, 130, 3}}) {
      const Tensor x = tied(shape, dt, 13);
      for (const DimList& dims : {DimList{0}, DimList{1}, DimList{2}, DimList{-1}, DimList{}}) {
        for (bool keepdim : {false, true}) check_all_ops(x, dims, keepdim);
      }
      for (const DimList& dims : {DimList{0, 1}, DimList{0, 2}, DimList{1, 2}}) check_all_ops(x, dims, true);
    }
    const Tensor transposed = tied({33, 40}, dt, 14).t();
    const Tensor stepped = tied({20, 50}, dt, 15).slice(1, 1, std::nullopt, 3);
    const Tensor permuted = tied({6, 7, 40}, dt, 16).permute({2, 0, 1});
    const Tensor expanded = tied({1, 37}, dt, 17).expand({50, 37});  // all ties along dim 0
    const Tensor row_stepped = tied({30, 50}, dt, 18).slice(0, 0, std::nullopt, 3);
    const Tensor split = tied({4, 6, 40}, dt, 19).slice(0, 0, std::nullopt, 2);
    check_all_ops(split, {0, 1}, false);
    for (const Tensor& v : {transposed, stepped, permuted, expanded, row_stepped, split}) {
      for (int64_t d = 0; d < v.dim(); ++d) check_all_ops(v, {d}, false);
      check_all_ops(v, {}, false);
    }
  }
}

TEST(ReduceMax, LargeShapes) {
  for (DType dt : {DType::Float32, DType::Float16, DType::Int64}) {
    check_all_ops(random_tensor({100003}, dt, 21), {}, false);
    check_all_ops(random_tensor({3, 100003}, dt, 22), {1}, false);
    check_all_ops(random_tensor({100003, 3}, dt, 23), {0}, false);
    check_all_ops(random_tensor({300, 2, 600}, dt, 24), {0}, false);
  }
}

TEST(ReduceMax, IntegerExtremesAndFloat8) {
  check_all_ops(from_doubles({0, 18446744073709551615.0, 9223372036854775808.0, 1}, {4}, DType::UInt64), {0}, false);
  Tensor i64 = Tensor::empty({3}, DType::Int64);
  i64.data<int64_t>()[0] = INT64_MIN;
  i64.data<int64_t>()[1] = INT64_MAX;
  i64.data<int64_t>()[2] = -1;
  check_all_ops(i64, {0}, false);
  check_all_ops(from_doubles({-128, 127, -1, 0}, {4}, DType::Int8), {0}, false);
  for (DType dt : {DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    check_all_ops(from_doubles(random_values(300, 25, -4.0, 4.0), {10, 30}, dt), {1}, false);
  }
}

TEST(ReduceMax, ZeroDimInputs) {
  const Tensor s = scalar_tensor(-2.5);
  EXPECT_EQ(max(s).item().to_double(), -2.5);
  EXPECT_EQ(amin(s, {0}).item().to_double(), -2.5);
  const ValuesIndices r = max(s, 0);
  EXPECT_EQ(r.values.dim(), 0);
  EXPECT_EQ(r.indices.item().to_int64(), 0);
  EXPECT_EQ(argmax(s).item().to_int64(), 0);
  EXPECT_EQ(argmin(s, -1, true).dim(), 0);
  EXPECT_EQ(argmax(zeros({2, 3}), std::nullopt, true).sizes(), (Shape{1, 1}));
  // Reducing a non-empty dim of a tensor with no elements gives no outputs.
  EXPECT_EQ(amax(zeros({0, 3}), {1}).sizes(), (Shape{0}));
  EXPECT_EQ(max(zeros({0, 3}), 1).indices.sizes(), (Shape{0}));
}

TEST(ReduceMax, Errors) {
  expect_error([] { amax(zeros({0})); }, ErrorKind::Index, "amax(): Expected reduction dim 0 to have non-zero size.");
  expect_error([] { amin(zeros({3, 0}), {1}); }, ErrorKind::Index,
               "amin(): Expected reduction dim 1 to have non-zero size.");
  expect_error([] { amax(zeros({2, 0, 3})); }, ErrorKind::Index, "dim 1 to have non-zero size");
  expect_error([] { max(zeros({0})); }, ErrorKind::Runtime,
               "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
               "with the 'dim' argument.");
  expect_error([] { min(zeros({2, 0})); }, ErrorKind::Runtime, "min(): Expected reduction dim to be specified");
  expect_error([] { max(zeros({3, 0}), 1); }, ErrorKind::Index, "max(): Expected reduction dim 1 to have non-zero size.");
  expect_error([] { argmax(zeros({0, 2})); }, ErrorKind::Runtime,
               "cannot perform reduction function argmax on a tensor with no elements because the operation does not "
               "have an identity");
  expect_error([] { argmin(zeros({0})); }, ErrorKind::Runtime, "cannot perform reduction function argmin");
  expect_error([] { argmax(zeros({0, 2}), 0); }, ErrorKind::Index,
               "argmax(): Expected reduction dim 0 to have non-zero size.");
  for (DType dt : {DType::Complex64, DType::Complex128}) {
    const Tensor z = zeros({3}, dt);
    expect_error([&] { amax(z); }, ErrorKind::Type, "does not support complex input");
    expect_error([&] { max(z); }, ErrorKind::Type, "does not support complex input");
    expect_error([&] { min(z, 0); }, ErrorKind::Type, "does not support complex input");
    expect_error([&] { argmin(z); }, ErrorKind::Type, "does not support complex input");
  }
  expect_error([] { max(zeros({2}), 1); }, ErrorKind::Index, "dimension out of range");
  expect_error([] { argmax(zeros({2}), -2); }, ErrorKind::Index, "dimension out of range");
  expect_error([] { amax(zeros({2, 2}), {1, -1}); }, ErrorKind::Runtime, "dim 1 appears multiple times");
}

}  // namespace
}  // namespace kiln
