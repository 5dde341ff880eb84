// Views whose one-element (or empty) dims carry strides near 2^61. PyTorch accepts any
// stride on a dim that is never stepped, so kiln does too; kernels that walk raw byte
// pointers must not scale such a stride (2^61 elements times 4 bytes overflows int64,
// which the sanitizer build turns into a failure). Each op on such a view must match the
// same op on its contiguous copy.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/advanced_index.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/index.h"
#include "kiln/ops/index_extra.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "kiln/tensor.h"

namespace kiln {
namespace {

constexpr int64_t kHuge = int64_t{1} << 61;

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}

void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.dtype(), want.dtype());
  if (got.dtype() == DType::Int64) {
    EXPECT_EQ(values_of<int64_t>(got), values_of<int64_t>(want));
  } else {
    EXPECT_EQ(values_of<float>(got), values_of<float>(want));
  }
}

// [2, 1, 3] over six unsorted floats, the middle dim's stride 2^61.
Tensor huge_stride_view() {
  const Tensor order = full({6}, Scalar(int64_t{0}), DType::Int64);
  const int64_t perm[] = {3, 5, 0, 4, 1, 2};
  for (int64_t i = 0; i < 6; ++i) order.data<int64_t>()[i] = perm[i];
  return take(arange(Scalar(int64_t{6}), DType::Float32), order).as_strided({2, 1, 3}, {3, kHuge, 1});
}

TEST(HugeStrideViews, GathersAndScattersMatchTheContiguousCopy) {
  const Tensor v = huge_stride_view();
  const Tensor c = v.contiguous();
  const Tensor rows = flip(arange(Scalar(int64_t{2}), DType::Int64), {0});
  expect_same(index_select(v, 0, rows), index_select(c, 0, rows));
  expect_same(index_select(v, 2, rows), index_select(c, 2, rows));
  const Tensor zero = zeros({1}, DType::Int64);
  expect_same(index_select(v, 1, zero), index_select(c, 1, zero));

  const Tensor gidx = zeros({2, 1, 3}, DType::Int64);
  expect_same(gather(v, 1, gidx), gather(c, 1, gidx));
  expect_same(gather(v, 0, gidx), gather(c, 0, gidx));
  expect_same(scatter_add(v, 1, gidx, v), scatter_add(c, 1, gidx, c));
  expect_same(scatter_add(v, 0, gidx, v), scatter_add(c, 0, gidx, c));

  expect_same(index(v, {std::nullopt, zero}), index(c, {std::nullopt, zero}));
  expect_same(index(v, {rows}), index(c, {rows}));
  const Tensor filled = v.clone();
  index_put_(filled, {std::nullopt, zero}, full({1}, Scalar(9.0), DType::Float32));
  const Tensor filled_c = c.clone();
  index_put_(filled_c, {std::nullopt, zero}, full({1}, Scalar(9.0), DType::Float32));
  expect_same(filled, filled_c);
  expect_same(take(v, rows), take(c, rows));
}

TEST(HugeStrideViews, SortsAndReductionsMatchTheContiguousCopy) {
  const Tensor v = huge_stride_view();
  const Tensor c = v.contiguous();
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE(dim);
    const ValuesIndices a = sort(v, dim), b = sort(c, dim);
    expect_same(a.values, b.values);
    expect_same(a.indices, b.indices);
    const ValuesIndices ta = topk(v, 1, dim), tb = topk(c, 1, dim);
    expect_same(ta.values, tb.values);
    expect_same(ta.indices, tb.indices);
    expect_same(cumsum(v, dim), cumsum(c, dim));
    expect_same(sum(v, {dim}), sum(c, {dim}));
  }
}

TEST(HugeStrideViews, EmptyViewsWithHugeStridesGiveEmptyResults) {
  // No element: as_strided checks no extent, so every stride is legal.
  const Tensor e = zeros({4}, DType::Float32).as_strided({0, 3}, {kHuge, 1});
  const Tensor idx = zeros({2}, DType::Int64);
  EXPECT_EQ(index_select(e, 1, idx).sizes(), (Shape{0, 2}));
  EXPECT_EQ(sort(e, 1).values.sizes(), (Shape{0, 3}));
  EXPECT_EQ(gather(e, 1, zeros({0, 1}, DType::Int64)).sizes(), (Shape{0, 1}));
  EXPECT_EQ(index(e, {std::nullopt, idx}).sizes(), (Shape{0, 2}));
  EXPECT_EQ(e.contiguous().sizes(), (Shape{0, 3}));
}

TEST(HugeStrideViews, GatherAndScatterIntoAnEmptyTensorWithHugeStridesRaise) {
  // An empty tensor may carry any strides; a non-empty index over it is out of bounds
  // before anything walks those strides (the index_ops fuzzer: 7e18 x 2 overflowed).
  const Tensor e = zeros({4}, DType::Float16).as_strided({0, 2, 2}, {1, 1, int64_t{3} << 60});
  const Tensor idx = zeros({1, 2, 2}, DType::Int64);
  const Tensor src = zeros({1, 2, 2}, DType::Float16);
  EXPECT_THROW(scatter_add(e, 0, idx, src), Error);
  EXPECT_THROW(gather(e, 0, idx), Error);
}

}  // namespace
}  // namespace kiln
