// nonzero, index and index_put_ against plain per-coordinate references: the reference
// maps every result coordinate back to a coordinate of self by the numpy/PyTorch rules
// (broadcast index tensors, advanced dims in place when adjacent, first otherwise) and
// reads one element at a time. Data movement is exact, and accumulation is compared with
// a serial loop that adds in the same (index) order, so results must match exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/advanced_index.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/index.h"
#include "kiln/scalar_types.h"
#include "kiln/type_promotion.h"
#include "test_util.h"

using namespace kiln;

namespace {

using kiln::testing::expect_error;

Tensor random_values(const Shape& shape, DType dt, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::Float64);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-50, 50);
  auto* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng) * 0.5;
  return t.to(dt);
}

Tensor long_tensor(const std::vector<int64_t>& values, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::Int64);
  // memcpy from an empty vector's null data() is undefined even for 0 bytes (UBSan).
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

Tensor bool_tensor(const std::vector<int>& values, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::Bool);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<uint8_t>(values[i] != 0);
  return t;
}

double total(const Tensor& t) {
  const Tensor d = t.to(DType::Float64).contiguous();
  double s = 0;
  for (int64_t i = 0; i < d.numel(); ++i) s += d.data<double>()[i];
  return s;
}

// Row-major coordinates of `shape`, one after another.
bool next_coord(Shape& coord, const Shape& shape) {
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (++coord[d] < shape[d]) return true;
    coord[d] = 0;
  }
  return false;
}

// Where each element of index(self, indices) comes from (int64 index tensors only).
struct RefPlan {
  Shape result;
  std::vector<Shape> sources;  // one coordinate of self per result element, row-major
};

RefPlan reference_plan(const Tensor& self, const IndexList& indices) {
  std::vector<int64_t> indexed;
  std::vector<Shape> shapes;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (indices[d]) {
      indexed.push_back(static_cast<int64_t>(d));
      shapes.push_back(indices[d]->sizes());
    }
  }
  const Shape b = broadcast_shapes(shapes);
  const bool adjacent = indexed.back() - indexed.front() + 1 == static_cast<int64_t>(indexed.size());
  const int64_t block_at = adjacent ? indexed.front() : 0;
  std::vector<int64_t> rest;  // result position -> self dim, for dims not indexed
  RefPlan plan;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d < static_cast<int64_t>(indices.size()) && indices[d]) continue;
    rest.push_back(d);
  }
  std::vector<int64_t> layout;  // -1 marks the broadcast block
  size_t r = 0;
  for (; r < rest.size() && rest[r] < block_at; ++r) layout.push_back(rest[r]);
  layout.push_back(-1);
  for (; r < rest.size(); ++r) layout.push_back(rest[r]);
  for (int64_t d : layout) {
    if (d >= 0) plan.result.push_back(self.size(d));
    else plan.result.insert(plan.result.end(), b.begin(), b.end());
  }
  if (shape_numel(plan.result) == 0) return plan;
  Shape coord(plan.result.size(), 0);
  do {
    Shape src(static_cast<size_t>(self.dim()), 0);
    size_t pos = 0;
    Shape bcoord;
    for (int64_t d : layout) {
      if (d >= 0) {
        src[d] = coord[pos++];
      } else {
        bcoord.assign(coord.begin() + static_cast<std::ptrdiff_t>(pos),
                      coord.begin() + static_cast<std::ptrdiff_t>(pos + b.size()));
        pos += b.size();
      }
    }
    for (int64_t d : indexed) {
      const Tensor& ix = *indices[d];
      Shape at(static_cast<size_t>(ix.dim()));
      for (int64_t j = 0; j < ix.dim(); ++j) {
        const int64_t bj = static_cast<int64_t>(b.size()) - ix.dim() + j;
        at[j] = ix.size(j) == 1 ? 0 : bcoord[bj];
      }
      int64_t v = ix.at(at).to_int64();
      if (v < 0) v += self.size(d);
      src[d] = v;
    }
    plan.sources.push_back(src);
  } while (next_coord(coord, plan.result));
  return plan;
}

void expect_matches_reference(const Tensor& self, const IndexList& indices) {
  const RefPlan plan = reference_plan(self, indices);
  const Tensor out = index(self, indices);
  ASSERT_EQ(out.sizes(), plan.result);
  ASSERT_EQ(out.dtype(), self.dtype());
  if (plan.sources.empty()) return;
  Shape coord(plan.result.size(), 0);
  size_t k = 0;
  do {
    const Scalar got = out.at(coord), want = self.at(plan.sources[k++]);
    ASSERT_EQ(got.to_double(), want.to_double()) << "at result element " << k - 1;
  } while (next_coord(coord, plan.result));
}

TEST(AdvancedIndex, ShapesAndValuesMatchReference) {
  const Tensor x = random_values({4, 5, 6}, DType::Float32, 1);
  const Tensor xt = random_values({6, 5, 4}, DType::Float32, 2).permute({2, 1, 0});  // non-contiguous
  const Tensor i2 = long_tensor({0, -1}, {2});
  const Tensor i3 = long_tensor({1, 3, 4}, {3});
  const Tensor col = long_tensor({2, 0, 1}, {3, 1});
  for (const Tensor& self : {x, xt}) {
    expect_matches_reference(self, {i2});
    expect_matches_reference(self, {std::nullopt, i3});
    expect_matches_reference(self, {i2, long_tensor({4, 0}, {2})});                         // adjacent pair
    expect_matches_reference(self, {long_tensor({1, 3, -4}, {3}), std::nullopt, long_tensor({5, 0, -6}, {3})});       // separated: block first
    expect_matches_reference(self, {std::nullopt, col, long_tensor({0, 1, 2, 3}, {4})});    // broadcast [3,1] x [4]
    expect_matches_reference(self, {col, std::nullopt, long_tensor({5, 4, 3, 2}, {1, 4})});  // broadcast, separated
    expect_matches_reference(self, {long_tensor({2}, {}), std::nullopt, std::nullopt});     // 0-dim index
    expect_matches_reference(self, {std::nullopt, i3.to(DType::Int32)});                     // int32 index
    expect_matches_reference(self, {long_tensor({}, {0})});                                  // empty index
  }
  // Zero-size and one-element inputs.
  EXPECT_EQ(index(zeros({0, 3}), {std::nullopt, long_tensor({2, 0}, {2})}).sizes(), (Shape{0, 2}));
  EXPECT_EQ(index(zeros({2, 0}), {long_tensor({1}, {1})}).sizes(), (Shape{1, 0}));
  expect_matches_reference(random_values({1}, DType::Float32, 8), {long_tensor({0, -1, 0}, {3})});
  // An expanded (stride-0) self and an expanded index.
  const Tensor wide = random_values({5}, DType::Float64, 3).expand({3, 5});
  expect_matches_reference(wide, {std::nullopt, long_tensor({4}, {1}).expand({7})});
}

TEST(AdvancedIndex, EveryDtypeMovesBitsExactly) {
  for (DType dt : {DType::Bool, DType::UInt8, DType::Int16, DType::Float16, DType::BFloat16, DType::Float64,
                   DType::Complex64, DType::Complex128, DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    const Tensor x = random_values({3, 7}, DType::Float64, 4).to(dt);
    const Tensor out = index(x, {std::nullopt, long_tensor({6, 0, 0, 3}, {4})});
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t cols[] = {6, 0, 0, 3};
      for (int64_t j = 0; j < 4; ++j) {
        EXPECT_EQ(std::memcmp(static_cast<const char*>(out.data_ptr()) + (i * 4 + j) * out.element_size(),
                              static_cast<const char*>(x.data_ptr()) + (i * 7 + cols[j]) * x.element_size(),
                              x.element_size()),
                  0)
            << dtype_name(dt);
      }
    }
  }
}

TEST(AdvancedIndex, LargeGatherSplitsAcrossThreadsAndMatches) {
  // More elements than one thread's grain, so index_gather runs in parallel.
  const Tensor x = random_values({300, 257}, DType::Float32, 5);
  std::vector<int64_t> rows(250);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>((i * 7) % 300) - 150;
  expect_matches_reference(x, {long_tensor(rows, {250})});
}

TEST(AdvancedIndex, MasksExpandToTheirNonzeroCoordinates) {
  const Tensor x = random_values({3, 4, 2}, DType::Float32, 6);
  const Tensor mask = bool_tensor({1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1}, {3, 4});
  const Tensor coords = nonzero(mask);
  expect_matches_reference(x, {coords.select(1, 0), coords.select(1, 1)});
  const Tensor by_mask = index(x, {mask});
  const Tensor by_coords = index(x, {coords.select(1, 0), coords.select(1, 1)});
  ASSERT_EQ(by_mask.sizes(), (Shape{5, 2}));
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(by_mask.at({i, j}).to_double(), by_coords.at({i, j}).to_double());
  }
  // A full-shape mask selects what masked_select does.
  const Tensor full_mask = bool_tensor({1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0}, {3, 4, 2});
  const Tensor a = index(x, {full_mask}), b = masked_select(x, full_mask);
  ASSERT_EQ(a.sizes(), b.sizes());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.at({i}).to_double(), b.at({i}).to_double());
  // A mask after an empty entry, and 0-dim masks (a new dim kept whole or emptied).
  EXPECT_EQ(index(x, {std::nullopt, bool_tensor({0, 1, 1, 0}, {4})}).sizes(), (Shape{3, 2, 2}));
  EXPECT_EQ(index(x, {bool_tensor({1}, {})}).sizes(), (Shape{1, 3, 4, 2}));
  EXPECT_EQ(index(x, {bool_tensor({0}, {})}).sizes(), (Shape{0, 3, 4, 2}));
}

TEST(AdvancedIndex, NonzeroMatchesReference) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> values{0.0, -0.0, 1.5, nan, -2.0, 0.0, INFINITY, 0.0, 3.0};
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Float8_e4m3fn,
                   DType::Float8_e5m2, DType::Complex64, DType::Complex128, DType::Int32, DType::UInt8,
                   DType::Bool}) {
    Tensor src = Tensor::empty({3, 3}, DType::Float64);
    std::vector<double> typed = values;
    if (!is_floating(dt) && !is_complex(dt)) {
      for (double& v : typed) v = std::isfinite(v) ? v : 7.0;  // integers have no NaN or inf
    }
    std::memcpy(src.data_ptr(), typed.data(), typed.size() * sizeof(double));
    const Tensor x = src.to(dt).t();  // non-contiguous
    const Tensor nz = nonzero(x);
    std::vector<Shape> want;
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        const Scalar v = x.at({i, j});
        const bool nonzero_value = is_complex(dt) ? v.to_complex() != std::complex<double>(0, 0)
                                                  : !(v.to_double() == 0.0);
        if (nonzero_value) want.push_back({i, j});
      }
    }
    ASSERT_EQ(nz.sizes(), (Shape{static_cast<int64_t>(want.size()), 2})) << dtype_name(dt);
    for (size_t r = 0; r < want.size(); ++r) {
      EXPECT_EQ(nz.at({static_cast<int64_t>(r), 0}).to_int64(), want[r][0]) << dtype_name(dt);
      EXPECT_EQ(nz.at({static_cast<int64_t>(r), 1}).to_int64(), want[r][1]) << dtype_name(dt);
    }
  }
  // Edge sizes: empty, one element, a 0-dim tensor, and lengths around a SIMD width.
  EXPECT_EQ(nonzero(zeros({0, 4})).sizes(), (Shape{0, 2}));
  EXPECT_EQ(nonzero(ones({1})).sizes(), (Shape{1, 1}));
  EXPECT_EQ(nonzero(scalar_tensor(Scalar(2.0))).sizes(), (Shape{1, 0}));
  EXPECT_EQ(nonzero(scalar_tensor(Scalar(0.0))).sizes(), (Shape{0, 0}));
  for (int64_t n : {15, 16, 17, 40000}) {
    const Tensor x = random_values({n}, DType::Float32, static_cast<uint32_t>(n));
    const Tensor nz = nonzero(x);
    int64_t r = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (x.at({i}).to_double() == 0.0) continue;
      ASSERT_EQ(nz.at({r++, 0}).to_int64(), i);
    }
    EXPECT_EQ(nz.size(0), r);
  }
}

TEST(AdvancedIndex, IndexPutWritesLastValueAndAccumulatesInOrder) {
  const Tensor rows = long_tensor({2, 0, 2, -1, 2}, {5});
  const Tensor values = random_values({5, 3}, DType::Float32, 7);
  Tensor put = zeros({4, 3});
  index_put_(put, {rows}, values, false);
  Tensor acc = ones({4, 3});
  index_put_(acc, {rows}, values, true);
  std::vector<std::vector<double>> want_put(4, std::vector<double>(3, 0.0)), want_acc(4, std::vector<double>(3, 1.0));
  for (int64_t k = 0; k < 5; ++k) {
    int64_t r = rows.at({k}).to_int64();
    if (r < 0) r += 4;
    for (int64_t c = 0; c < 3; ++c) {
      const float v = static_cast<float>(values.at({k, c}).to_double());
      want_put[r][c] = v;
      want_acc[r][c] = static_cast<float>(static_cast<float>(want_acc[r][c]) + v);  // float32 adds, in order
    }
  }
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(put.at({r, c}).to_double(), want_put[r][c]);
      EXPECT_EQ(acc.at({r, c}).to_double(), want_acc[r][c]);
    }
  }
  // Values broadcast to the indexing result; a separated pair writes through the block-first layout.
  Tensor grid = zeros({3, 4, 5}, DType::Int64);
  index_put_(grid, {long_tensor({0, 2}, {2}), std::nullopt, long_tensor({4, 1}, {2})},
             long_tensor({7, 8, 9, 10}, {4}), false);
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_EQ(grid.at({0, j, 4}).to_int64(), 7 + j);
    EXPECT_EQ(grid.at({2, j, 1}).to_int64(), 7 + j);
  }
  EXPECT_EQ(total(grid), 2 * (7 + 8 + 9 + 10));
  // A single mask with one value fills through masked_fill_, converting the value.
  Tensor filled = zeros({2, 3});
  index_put_(filled, {bool_tensor({1, 0, 1, 0, 0, 1}, {2, 3})}, long_tensor({5}, {1}), false);
  EXPECT_EQ(total(filled), 15.0);
  // Integers wrap; bool accumulates as logical or.
  Tensor bytes = full({2}, Scalar(int64_t{250}), DType::UInt8);
  index_put_(bytes, {long_tensor({0, 0}, {2})}, full({2}, Scalar(int64_t{5}), DType::UInt8), true);
  EXPECT_EQ(bytes.at({0}).to_int64(), 4);
  // index_put leaves its input alone.
  const Tensor base = zeros({3});
  const Tensor copy = index_put(base, {long_tensor({1}, {1})}, ones({1}), false);
  EXPECT_EQ(total(base), 0.0);
  EXPECT_EQ(copy.at({1}).to_double(), 1.0);
}

TEST(AdvancedIndex, BadInputsRaisePyTorchsErrors) {
  const Tensor x = zeros({3, 4});
  expect_error([&] { index(x, {long_tensor({3}, {1})}); }, ErrorKind::Index,
               "index 3 is out of bounds for dimension 0 with size 3");
  expect_error([&] { index(x, {std::nullopt, long_tensor({-5}, {1})}); }, ErrorKind::Index,
               "index -5 is out of bounds for dimension 1 with size 4");
  expect_error([&] { index(x, {long_tensor({0, 1}, {2}), long_tensor({0, 1, 2}, {3})}); }, ErrorKind::Index,
               "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]");
  expect_error([&] { index(x, {bool_tensor({1, 0}, {2})}); }, ErrorKind::Index,
               "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 4] at index 0");
  expect_error([&] { index(x, {zeros({1})}); }, ErrorKind::Index,
               "tensors used as indices must be long, int, byte or bool tensors");
  expect_error([&] { index(x, {std::nullopt, std::nullopt, long_tensor({0}, {1})}); }, ErrorKind::Index,
               "too many indices for tensor of dimension 2");
  expect_error([&] { index(x, {bool_tensor({1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1}, {3, 4}), long_tensor({0}, {1})}); },
               ErrorKind::Index, "too many indices for tensor of dimension 2");
  Tensor y = zeros({3});
  expect_error([&] { index_put_(y, {long_tensor({0}, {1})}, long_tensor({1}, {1}), false); }, ErrorKind::Runtime,
               "Index put requires the source and destination dtypes match, got float32 for the destination and "
               "int64 for the source.");
  expect_error([&] { index_put_(y, {long_tensor({0, 1}, {2})}, ones({3}), false); }, ErrorKind::Runtime,
               "shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [2]");
  expect_error([&] { index_put_(y, {long_tensor({7}, {1})}, ones({1}), true); }, ErrorKind::Index,
               "index 7 is out of bounds for dimension 0 with size 3");
  // A bad index after good ones: nothing is written (every index is checked first).
  expect_error([&] { index_put_(y, {long_tensor({0, 1, 3}, {3})}, ones({3}), false); }, ErrorKind::Index,
               "index 3 is out of bounds for dimension 0 with size 3");
  expect_error([&] { index_put_(y, {long_tensor({2, -4}, {2})}, ones({2}), true); }, ErrorKind::Index,
               "index -4 is out of bounds for dimension 0 with size 3");
  Tensor f8 = zeros({3}, DType::Float8_e4m3fn);
  expect_error([&] { index_put_(f8, {long_tensor({0}, {1})}, zeros({1}, DType::Float8_e4m3fn), true); },
               ErrorKind::Type, "accumulate is not implemented for float8_e4m3fn");
  Tensor expanded = zeros({1}).expand({3});
  expect_error([&] { index_put_(expanded, {long_tensor({0}, {1})}, ones({1}), false); }, ErrorKind::Runtime,
               "index_put_");
  Tensor bytes = zeros({2}, DType::UInt8);
  expect_error([&] { index_put_(bytes, {long_tensor({0}, {1})}, Scalar(int64_t{300})); }, ErrorKind::Runtime,
               "value cannot be converted to type uint8 without overflow");
  index_put_(bytes, {long_tensor({1}, {1})}, Scalar(2.5));
  EXPECT_EQ(bytes.at({1}).to_int64(), 2);
  // Nothing was written by the failed calls.
  EXPECT_EQ(total(y), 0.0);
}

}  // namespace
