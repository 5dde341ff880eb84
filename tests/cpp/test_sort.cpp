// sort, argsort and topk against std::stable_sort with PyTorch's order (NaN above every
// number, -0.0 equal to 0.0): every real dtype, the size sweep, ties (stability), each
// dim of 3-D tensors, strided and broadcast views, every k, 0-dim and empty inputs,
// errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "reduce_test_utils.h"

namespace kiln {
namespace {

using namespace reduce_test;

// PyTorch's order: NaN above every number.
bool less(long double a, long double b) { return !std::isnan(a) && (std::isnan(b) || a < b); }

// Checks values/indices of shape `out_shape` as the first k of each line's stable
// order (ascending, or descending with ties still in input order). With `ordered`
// false only the selected set is checked.
void check_lines(const Tensor& input, int64_t dim, int64_t k, bool descending, bool ordered, const ValuesIndices& r) {
  Shape out_shape = input.sizes();
  out_shape[dim] = k;
  ASSERT_EQ(r.values.sizes(), out_shape);
  ASSERT_EQ(r.indices.sizes(), out_shape);
  EXPECT_EQ(r.values.dtype(), input.dtype());
  EXPECT_EQ(r.indices.dtype(), DType::Int64);
  const auto x = exact_values(input), got_v = exact_values(r.values);
  const auto got_i = to_int64s(r.indices);
  std::vector<bool> along(input.sizes().size(), false);
  along[dim] = true;
  const auto in_lines = reduction_groups(input.sizes(), along);
  const auto out_lines = reduction_groups(out_shape, along);
  for (size_t l = 0; l < in_lines.size(); ++l) {
    const auto& line = in_lines[l];
    std::vector<int64_t> order(line.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return descending ? less(x[line[b]], x[line[a]]) : less(x[line[a]], x[line[b]]);
    });
    order.resize(static_cast<size_t>(k));
    std::vector<int64_t> got(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) {
      const int64_t at = out_lines[l][j];
      got[j] = got_i[at];
      ASSERT_TRUE(got[j] >= 0 && got[j] < static_cast<int64_t>(line.size())) << got[j];
      // The value is the input element at the index, bit for bit (NaN, zero signs).
      const long double want = x[line[got[j]]];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got_v[at]));
      } else {
        EXPECT_EQ(got_v[at], want);
        EXPECT_EQ(std::signbit(got_v[at]), std::signbit(want));
      }
    }
    if (!ordered) {
      std::sort(order.begin(), order.end());
      std::sort(got.begin(), got.end());
    }
    EXPECT_EQ(got, order) << "line " << l;
  }
}

void check_sort(const Tensor& input, int64_t dim, bool descending) {
  SCOPED_TRACE(input.describe() + " strides " + shape_to_string(input.strides()) + " dim " + std::to_string(dim) +
               (descending ? " descending" : ""));
  const ValuesIndices r = sort(input, dim, descending, /*stable=*/true);
  const int64_t d = (dim % input.dim() + input.dim()) % input.dim();
  check_lines(input, d, input.sizes()[d], descending, true, r);
  EXPECT_EQ(to_int64s(argsort(input, dim, descending)), to_int64s(r.indices));
  EXPECT_EQ(to_int64s(sort(input, dim, descending, /*stable=*/false).indices), to_int64s(r.indices));
}

void check_topk(const Tensor& input, int64_t k, int64_t dim, bool largest, bool sorted) {
  SCOPED_TRACE(input.describe() + " strides " + shape_to_string(input.strides()) + " k " + std::to_string(k) +
               " dim " + std::to_string(dim) + (largest ? " largest" : " smallest") + (sorted ? " sorted" : ""));
  const int64_t d = (dim % input.dim() + input.dim()) % input.dim();
  check_lines(input, d, k, largest, sorted, topk(input, k, dim, largest, sorted));
}

const std::vector<DType> kDtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                    DType::Float8_e4m3fn, DType::Bool, DType::UInt8, DType::UInt16,
                                    DType::UInt32, DType::UInt64, DType::Int8, DType::Int16, DType::Int32,
                                    DType::Int64};

// Values from a small set, so ties are everywhere.
Tensor tied(const Shape& shape, DType dtype, uint32_t seed) {
  const bool unsigned_like = is_unsigned(dtype) || dtype == DType::Bool;
  const double lo = unsigned_like ? 0.0 : -4.0, hi = dtype == DType::Bool ? 1.0 : 4.0;
  return from_doubles(random_values(shape_numel(shape), seed, lo, hi, true), shape, dtype);
}

TEST(SortSort, SizeSweepEveryDtype) {
  for (DType dt : kDtypes) {
    for (int64_t n : kSweepSizes) {
      if (n > 40000) continue;  // the reference is slow; 100003 runs below
      for (bool descending : {false, true}) {
        check_sort(random_tensor({n}, dt, static_cast<uint32_t>(n)), 0, descending);
        check_sort(tied({n}, dt, static_cast<uint32_t>(n)), -1, descending);
      }
    }
  }
  check_sort(random_tensor({100003}, DType::Float32, 1), 0, false);
}

TEST(SortSort, NanInfAndSignedZeros) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v = {3.0, nan, -0.0, -inf, 0.0, inf, -nan, -1.0, 0.0, nan, -0.0, 2.0};
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    const Tensor x = from_doubles(v, {static_cast<int64_t>(v.size())}, dt);
    for (bool descending : {false, true}) check_sort(x, 0, descending);
    for (int64_t k : {0, 1, 2, 3, 6, 12}) {
      for (bool largest : {false, true}) check_topk(x, k, 0, largest, true);
    }
  }
  const Tensor sorted = sort(from_doubles({nan, 1.0, -inf}, {3}, DType::Float32)).values;
  EXPECT_TRUE(std::isnan(to_doubles(sorted)[2]));
  EXPECT_EQ(to_int64s(sort(from_doubles({nan, 1.0, -inf}, {3}, DType::Float32), 0, true).indices),
            (std::vector<int64_t>{0, 1, 2}));
}

TEST(SortSort, EveryDimAndLayout) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::UInt8, DType::Bool}) {
    for (const Shape& shape : {Shape{5, 7, 33}, Shape{2, 130, 3}}) {
      const Tensor x = tied(shape, dt, 3);
      for (int64_t dim : {0, 1, 2, -1}) {
        check_sort(x, dim, false);
        check_sort(x, dim, true);
      }
    }
    const Tensor transposed = tied({33, 40}, dt, 4).t();
    const Tensor stepped = tied({20, 50}, dt, 5).slice(1, 1, std::nullopt, 3);
    const Tensor expanded = tied({1, 37}, dt, 6).expand({50, 37});  // every line of dim 0 all ties
    for (const Tensor& v : {transposed, stepped, expanded}) {
      for (int64_t dim : {0, 1}) check_sort(v, dim, dim == 1);
    }
  }
  check_sort(random_tensor({200, 500}, DType::Float32, 7), 0, true);  // many lines, several threads
}

TEST(SortSort, ZeroDimAndEmpty) {
  const ValuesIndices s = sort(scalar_tensor(4.5), 0);
  EXPECT_EQ(s.values.dim(), 0);
  EXPECT_EQ(s.values.item().to_double(), 4.5);
  EXPECT_EQ(s.indices.item().to_int64(), 0);
  EXPECT_EQ(argsort(scalar_tensor(1.0), -1).dim(), 0);
  EXPECT_EQ(sort(zeros({0})).values.sizes(), (Shape{0}));
  EXPECT_EQ(sort(zeros({3, 0}), 0).indices.sizes(), (Shape{3, 0}));
  EXPECT_EQ(sort(zeros({0, 4}), 1).indices.sizes(), (Shape{0, 4}));
}

TEST(SortTopk, EveryKDimAndDtype) {
  for (DType dt : kDtypes) {
    for (int64_t n : {1, 5, 17, 100, 1000}) {
      const Tensor x = tied({n}, dt, static_cast<uint32_t>(n));
      const Tensor y = random_tensor({n}, dt, static_cast<uint32_t>(n) + 1);
      for (int64_t k : {int64_t{0}, int64_t{1}, n / 2, n - 1, n}) {
        if (k < 0) continue;
        for (bool largest : {true, false}) {
          check_topk(x, k, 0, largest, true);
          check_topk(y, k, -1, largest, false);
        }
      }
    }
  }
  for (const Tensor& x : {tied({5, 7, 33}, DType::Float32, 8), tied({33, 40}, DType::Int64, 9).t(),
                          tied({20, 50}, DType::Float16, 10).slice(1, 0, std::nullopt, 2),
                          tied({1, 37}, DType::Float64, 11).expand({50, 37})}) {
    for (int64_t dim = 0; dim < x.dim(); ++dim) {
      for (int64_t k : {int64_t{1}, x.sizes()[dim] / 2, x.sizes()[dim]}) {
        check_topk(x, k, dim, true, true);
        check_topk(x, k, dim, false, false);
      }
    }
  }
  check_topk(random_tensor({4, 100003}, DType::Float32, 12), 10, 1, true, true);
}

TEST(SortTopk, ZeroDimAndEmpty) {
  const ValuesIndices r = topk(scalar_tensor(2.0), 1);
  EXPECT_EQ(r.values.dim(), 0);
  EXPECT_EQ(r.values.item().to_double(), 2.0);
  EXPECT_EQ(r.indices.item().to_int64(), 0);
  EXPECT_EQ(topk(scalar_tensor(2.0), 0, 0).values.dim(), 0);  // PyTorch keeps the 0-dim shape
  EXPECT_EQ(topk(zeros({3, 0}), 0, 1).values.sizes(), (Shape{3, 0}));
  EXPECT_EQ(topk(zeros({0, 5}), 2, 1).indices.sizes(), (Shape{0, 2}));
  EXPECT_EQ(topk(zeros({4, 5}), 0).values.sizes(), (Shape{4, 0}));
}

TEST(SortTopk, Errors) {
  expect_error([] { topk(zeros({3}), 4); }, ErrorKind::Index, "selected index k out of range");
  expect_error([] { topk(zeros({3}), -1); }, ErrorKind::Index, "selected index k out of range");
  expect_error([] { topk(scalar_tensor(1.0), 2); }, ErrorKind::Index, "selected index k out of range");
  expect_error([] { topk(zeros({3, 2}), 1, 2); }, ErrorKind::Index, "dimension out of range");
  expect_error([] { sort(zeros({3}), 1); }, ErrorKind::Index, "dimension out of range");
  expect_error([] { argsort(zeros({3}), -2); }, ErrorKind::Index, "dimension out of range");
  for (DType dt : {DType::Complex64, DType::Complex128}) {
    expect_error([&] { sort(zeros({3}, dt)); }, ErrorKind::Type, "does not support complex input");
    expect_error([&] { topk(zeros({3}, dt), 1); }, ErrorKind::Type, "does not support complex input");
    expect_error([&] { argsort(zeros({3}, dt)); }, ErrorKind::Type, "does not support complex input");
  }
  expect_error([] { sort(Tensor()); }, ErrorKind::Runtime, "undefined");
}

}  // namespace
}  // namespace kiln
