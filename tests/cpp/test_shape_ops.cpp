// cat, stack, the split family, unbind and flip against index arithmetic on iota
// tensors, PyTorch's sizing rules (chunk's ceil sizes, tensor_split's remainders, cat's
// legacy empty skip, promotion) and every error path.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"
#include "index_walk_test_util.h"
#include "test_util.h"

using namespace kiln;

namespace {

using kiln::testing::expect_error;

// Row-major iota starting at `start`: every element distinct.
Tensor iota(const Shape& s, DType dt = DType::Float32, int64_t start = 0) {
  return arange(Scalar(start), Scalar(start + shape_numel(s)), Scalar(int64_t{1}), DType::Float64).view(s).to(dt);
}

double get(const Tensor& t, const Shape& i) { return t.at(i).to_double(); }

using kiln::testing::for_each_index;

std::vector<int64_t> sizes_along(const std::vector<Tensor>& parts, int64_t dim) {
  std::vector<int64_t> out;
  for (const Tensor& p : parts) out.push_back(p.size(dim));
  return out;
}

}  // namespace

TEST(ShapeOps, CatAlongEveryDim) {
  for (int64_t dim = 0; dim < 3; ++dim) {
    Shape sa = {2, 3, 4}, sb = {2, 3, 4}, sc = {2, 3, 4};
    sb[dim] = 1;
    sc[dim] = 5;
    // Contiguous, transposed-then-back (non-contiguous) and sliced inputs.
    const Tensor a = iota(sa, DType::Float32, 0);
    const Tensor b = iota({sb[2], sb[1], sb[0]}, DType::Float32, 100).permute({2, 1, 0});
    Shape sc_wide = sc;
    sc_wide[2] *= 2;
    const Tensor c = iota(sc_wide, DType::Float32, 1000).slice(2, 0, std::nullopt, 2);
    const Tensor out = cat({a, b, c}, dim);
    Shape want = sa;
    want[dim] = sa[dim] + sb[dim] + sc[dim];
    ASSERT_EQ(out.sizes(), want);
    for_each_index(want, [&](const Shape& i) {
      Shape j = i;
      double expected;
      if (i[dim] < sa[dim]) {
        expected = get(a, j);
      } else if (i[dim] < sa[dim] + sb[dim]) {
        j[dim] -= sa[dim];
        expected = get(b, j);
      } else {
        j[dim] -= sa[dim] + sb[dim];
        expected = get(c, j);
      }
      ASSERT_EQ(get(out, i), expected) << "dim " << dim;
    });
  }
  // Negative dim, a single input (a copy), and a large multi-threaded cat.
  EXPECT_EQ(cat({iota({2, 2}), iota({2, 3})}, -1).sizes(), (Shape{2, 5}));
  const Tensor one = iota({3});
  const Tensor copy = cat({one});
  EXPECT_NE(copy.storage(), one.storage());
  EXPECT_EQ(get(copy, {2}), 2.0);
  const Tensor big = cat({iota({1000, 300}), iota({1000, 7}, DType::Float32, 5)}, 1);
  EXPECT_EQ(get(big, {999, 299}), 999.0 * 300 + 299);
  EXPECT_EQ(get(big, {999, 306}), 5 + 999.0 * 7 + 6);
}

TEST(ShapeOps, CatPromotesAndKeepsBytes) {
  const Tensor out = cat({iota({2}, DType::Int32), iota({2}, DType::Float16, 2), iota({1}, DType::Bool, 1)});
  EXPECT_EQ(out.dtype(), DType::Float16);
  EXPECT_EQ(get(out, {3}), 3.0);
  EXPECT_EQ(get(out, {4}), 1.0);
  EXPECT_EQ(cat({iota({2}, DType::BFloat16), iota({2}, DType::Float16)}).dtype(), DType::Float32);
  EXPECT_EQ(cat({iota({2}, DType::Bool), iota({2}, DType::Int8)}).dtype(), DType::Int8);
  EXPECT_EQ(cat({iota({2}, DType::UInt8), iota({2}, DType::Int8)}).dtype(), DType::Int16);
  // Same-dtype fp8 is copied bit for bit (NaN codes included).
  Tensor bytes = Tensor::empty({256}, DType::UInt8);
  for (int i = 0; i < 256; ++i) bytes.data<uint8_t>()[i] = static_cast<uint8_t>(i);
  const Tensor fp8 = Tensor::from_storage(bytes.storage(), {256}, {1}, 0, DType::Float8_e4m3fn);
  const Tensor joined = cat({fp8.narrow(0, 128, 128), fp8.narrow(0, 0, 128)});
  ASSERT_EQ(joined.dtype(), DType::Float8_e4m3fn);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(static_cast<const uint8_t*>(joined.data_ptr())[i], (i + 128) % 256);
}

TEST(ShapeOps, CatSkipsLegacyEmptyTensors) {
  // 1-D size-[0] tensors are ignored whatever the others' shape, but still promote.
  const Tensor t = iota({2, 3});
  const Tensor out = cat({empty({0}), t, empty({0}, DType::Float64)}, 1);
  EXPECT_EQ(out.sizes(), (Shape{2, 3}));
  EXPECT_EQ(out.dtype(), DType::Float64);
  EXPECT_EQ(get(out, {1, 2}), 5.0);
  const Tensor all_empty = cat({empty({0}, DType::Int32), empty({0}, DType::Int64)});
  EXPECT_EQ(all_empty.sizes(), (Shape{0}));
  EXPECT_EQ(all_empty.dtype(), DType::Int64);
  // Empty tensors of other shapes take part normally.
  EXPECT_EQ(cat({empty({0, 3}), t}).sizes(), (Shape{2, 3}));
  expect_error([&] { cat({empty({0, 4}), t}); }, ErrorKind::Runtime, "Sizes of tensors must match except in dimension 0");
}

TEST(ShapeOps, CatErrors) {
  const Tensor t = iota({2, 3});
  expect_error([&] { cat({}); }, ErrorKind::Value, "expected a non-empty list of Tensors");
  expect_error([&] { cat({t, scalar_tensor(Scalar(1.0))}); }, ErrorKind::Runtime,
               "zero-dimensional tensor (at position 1) cannot be concatenated");
  expect_error([&] { cat({t, iota({2, 3, 1})}); }, ErrorKind::Runtime,
               "Tensors must have same number of dimensions: got 2 and 3");
  expect_error([&] { cat({t, iota({2, 3}), iota({2, 4})}, 0); }, ErrorKind::Runtime,
               "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor number 2 "
               "in the list");
  expect_error([&] { cat({t, t}, 2); }, ErrorKind::Index, "dimension out of range");
  expect_error([&] { cat({t, iota({2, 3}, DType::Float8_e5m2)}); }, ErrorKind::Type, "Promotion for Float8 Types");
  expect_error([&] { cat({t, Tensor()}); }, ErrorKind::Runtime, "tensor at position 1 is undefined");
}

TEST(ShapeOps, Stack) {
  const Tensor a = iota({2, 3}), b = iota({3, 2}, DType::Int64, 10).t();
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    const Tensor out = stack({a, b}, dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape want = {2, 3};
    want.insert(want.begin() + d, 2);
    ASSERT_EQ(out.sizes(), want);
    EXPECT_EQ(out.dtype(), DType::Float32);
    for_each_index(want, [&](const Shape& i) {
      Shape j = i;
      const int64_t which = j[d];
      j.erase(j.begin() + d);
      ASSERT_EQ(get(out, i), get(which == 0 ? a : b, j));
    });
  }
  EXPECT_EQ(stack({scalar_tensor(Scalar(1.0)), scalar_tensor(Scalar(2.0))}).sizes(), (Shape{2}));
  expect_error([&] { stack({}); }, ErrorKind::Value, "stack expects a non-empty TensorList");
  expect_error([&] { stack({a, iota({2, 4})}); }, ErrorKind::Runtime,
               "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] at entry 1");
  expect_error([&] { stack({a, a}, 3); }, ErrorKind::Index, "dimension out of range");
}

TEST(ShapeOps, SplitReturnsViews) {
  const Tensor t = iota({7, 4});
  const auto parts = split(t, 3);
  EXPECT_EQ(sizes_along(parts, 0), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(parts[2].storage(), t.storage());
  EXPECT_EQ(get(parts[2], {0, 1}), get(t, {6, 1}));
  EXPECT_EQ(sizes_along(split(t, 4, 1), 1), (std::vector<int64_t>{4}));
  EXPECT_EQ(sizes_along(split(t, 10), 0), (std::vector<int64_t>{7}));
  EXPECT_EQ(sizes_along(split(t, 1, -1), 1), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(sizes_along(split(empty({0, 2}), 0), 0), (std::vector<int64_t>{0}));
  EXPECT_EQ(sizes_along(split(empty({0, 2}), 3), 0), (std::vector<int64_t>{0}));

  const auto sized = split_with_sizes(t, {2, 0, 5});
  EXPECT_EQ(sizes_along(sized, 0), (std::vector<int64_t>{2, 0, 5}));
  EXPECT_EQ(get(sized[2], {0, 0}), get(t, {2, 0}));
  EXPECT_EQ(sized[2].storage(), t.storage());

  expect_error([&] { split(t, -1); }, ErrorKind::Value, "split expects split_size be non-negative, but got split_size=-1");
  expect_error([&] { split(t, 0); }, ErrorKind::Runtime,
               "split_size can only be 0 if dimension size is 0, but got dimension size of 7");
  expect_error([&] { split(scalar_tensor(Scalar(1.0)), 1); }, ErrorKind::Runtime, "at least a 1-dimensional tensor");
  expect_error([&] { split(t, 1, 2); }, ErrorKind::Index, "dimension out of range");
  expect_error([&] { split_with_sizes(t, {2, 2}); }, ErrorKind::Value,
               "split_with_sizes expects split_sizes to sum exactly to 7 (input tensor's size at dimension 0), but "
               "got split_sizes=[2, 2]");
  expect_error([&] { split_with_sizes(t, {8, -1}); }, ErrorKind::Value, "only non-negative entries");
}

TEST(ShapeOps, ChunkUsesCeilSizes) {
  EXPECT_EQ(sizes_along(chunk(iota({5}), 3), 0), (std::vector<int64_t>{2, 2, 1}));
  // ceil(6 / 4) = 2: three chunks, fewer than asked, as in PyTorch.
  EXPECT_EQ(sizes_along(chunk(iota({6}), 4), 0), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(sizes_along(chunk(iota({2}), 5), 0), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(sizes_along(chunk(iota({3, 9}), 2, 1), 1), (std::vector<int64_t>{5, 4}));
  // An empty dim gives `chunks` empty pieces.
  EXPECT_EQ(sizes_along(chunk(empty({0, 3}), 3), 0), (std::vector<int64_t>{0, 0, 0}));
  const auto parts = chunk(iota({3, 9}), 2, 1);
  EXPECT_EQ(get(parts[1], {2, 0}), get(iota({3, 9}), {2, 5}));
  expect_error([&] { chunk(iota({3}), 0); }, ErrorKind::Value, "chunk expects `chunks` to be greater than 0, got: 0");
  expect_error([&] { chunk(scalar_tensor(Scalar(1.0)), 1); }, ErrorKind::Runtime, "at least a 1-dimensional tensor");
}

TEST(ShapeOps, TensorSplit) {
  EXPECT_EQ(sizes_along(tensor_split(iota({7}), 3), 0), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(sizes_along(tensor_split(iota({2}), 4), 0), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(sizes_along(tensor_split_indices(iota({6}), {1, 4}), 0), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(sizes_along(tensor_split_indices(iota({6}), {-2}), 0), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(sizes_along(tensor_split_indices(iota({6}), {10}), 0), (std::vector<int64_t>{6, 0}));
  // Decreasing indices give an empty middle piece and an overlapping tail (Python slicing).
  const auto parts = tensor_split_indices(iota({6}), {4, 1});
  EXPECT_EQ(sizes_along(parts, 0), (std::vector<int64_t>{4, 0, 5}));
  EXPECT_EQ(get(parts[2], {0}), 1.0);
  EXPECT_EQ(sizes_along(tensor_split_indices(iota({2, 5}), {}, 1), 1), (std::vector<int64_t>{5}));
  expect_error([&] { tensor_split(iota({3}), 0); }, ErrorKind::Value, "number of sections must be larger than 0, got 0");
  expect_error([&] { tensor_split(scalar_tensor(Scalar(1.0)), 2); }, ErrorKind::Runtime,
               "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims");
}

TEST(ShapeOps, Unbind) {
  const Tensor t = iota({2, 3});
  const auto cols = unbind(t, 1);
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(cols[2].sizes(), (Shape{2}));
  EXPECT_EQ(get(cols[2], {1}), 5.0);
  EXPECT_EQ(cols[2].storage(), t.storage());
  EXPECT_TRUE(unbind(empty({0, 2})).empty());
  expect_error([&] { unbind(scalar_tensor(Scalar(1.0))); }, ErrorKind::Index, "tensor has no dimensions");
}

TEST(ShapeOps, Flip) {
  const Tensor t = iota({3, 4, 5}, DType::Int16);
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{0}, {2}, {0, 2}, {-1, 1, 0}, {}}) {
    const Tensor out = flip(t, dims);
    ASSERT_EQ(out.sizes(), t.sizes());
    ASSERT_TRUE(out.is_contiguous());
    for_each_index(t.sizes(), [&](const Shape& i) {
      Shape j = i;
      for (int64_t d : dims) {
        const int64_t w = d < 0 ? d + 3 : d;
        j[w] = t.size(w) - 1 - i[w];
      }
      ASSERT_EQ(get(out, i), get(t, j));
    });
  }
  // Non-contiguous input, empty and 0-dim tensors.
  const Tensor tt = iota({4, 6}).t().slice(0, 0, std::nullopt, 2);  // [3, 4]
  const Tensor ft = flip(tt, {0, 1});
  for_each_index(tt.sizes(), [&](const Shape& i) { ASSERT_EQ(get(ft, i), get(tt, {2 - i[0], 3 - i[1]})); });
  EXPECT_EQ(flip(empty({0, 3}), {0, 1}).sizes(), (Shape{0, 3}));
  EXPECT_EQ(flip(scalar_tensor(Scalar(4.0)), {0}).item().to_double(), 4.0);
  expect_error([&] { flip(t, {0, -3}); }, ErrorKind::Runtime, "dim 0 appears multiple times in the list of dims");
  expect_error([&] { flip(t, {3}); }, ErrorKind::Index, "dimension out of range");
}
