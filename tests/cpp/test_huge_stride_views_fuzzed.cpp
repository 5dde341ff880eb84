// Regressions found by the index_ops fuzzer (fuzz/index_ops.cpp): ops on views whose
// one-element dims carry strides near 2^62 (PyTorch accepts any stride on a dim that is
// never stepped). A kernel that scales such a stride by a position it never reads
// overflows int64, which the sanitizer build turns into a failure. Each op on such a
// view must match the same op on its contiguous copy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/pad.h"
#include "kiln/ops/reduce.h"
#include "kiln/error.h"
#include "kiln/ops/shape.h"
#include "kiln/tensor.h"

namespace kiln {
namespace {

constexpr int64_t kStrides[] = {int64_t{1} << 61, int64_t{1} << 62, INT64_MAX, INT64_MIN, -(int64_t{1} << 62)};

std::vector<float> values_of(const Tensor& t) {
  const Tensor c = t.to(DType::Float32).contiguous();
  const float* p = c.data<float>();
  return std::vector<float>(p, p + c.numel());
}

void expect_same(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.dtype(), want.dtype());
  const std::vector<float> g = values_of(got), w = values_of(want);
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "element " << i;  // var over one element: 0 / 0
    } else {
      EXPECT_EQ(g[i], w[i]) << "element " << i;
    }
  }
}

// [3, 1, 2] over 0..5 with the middle dim's stride `huge`.
Tensor view_with_stride(int64_t huge, DType dtype = DType::Float32) {
  return arange(Scalar(int64_t{6}), dtype).as_strided({3, 1, 2}, {2, huge, 1});
}

TEST(HugeStrideViewsFuzzed, ConstantPadOfAOneElementDim) {
  for (const int64_t huge : kStrides) {
    SCOPED_TRACE(huge);
    const Tensor v = view_with_stride(huge);
    const Tensor c = v.contiguous();
    // Rows 1 and 2 of the padded middle dim are fill: their index times the stride
    // was computed before it was known to be outside the input.
    expect_same(pad(v, {0, 0, 0, 2}), pad(c, {0, 0, 0, 2}));
    expect_same(pad(v, {1, 1, 2, 2, 1, 0}, "constant", 7.0), pad(c, {1, 1, 2, 2, 1, 0}, "constant", 7.0));
    expect_same(pad(v, {0, -1, 3, 0}), pad(c, {0, -1, 3, 0}));
    const Tensor padded = pad(v, {0, 0, 0, 2}, "constant", -1.0);
    EXPECT_EQ(padded.sizes(), (Shape{3, 3, 2}));
    EXPECT_EQ(values_of(padded), (std::vector<float>{0, 1, -1, -1, -1, -1, 2, 3, -1, -1, -1, -1, 4, 5, -1, -1, -1, -1}));
  }
}

TEST(HugeStrideViewsFuzzed, ComplexVarianceAndNormOfAOneElementDim) {
  // var and the 2-norm of a complex tensor reduce its (re, im) pairs as a real view,
  // whose strides are twice the complex ones: 2^62 doubled overflows.
  for (const int64_t huge : kStrides) {
    SCOPED_TRACE(huge);
    const Tensor v = view_with_stride(huge, DType::Complex64);
    const Tensor c = v.contiguous();
    for (const DimList& dims : {DimList{}, DimList{1}, DimList{0, 2}}) {
      expect_same(var(v, dims), var(c, dims));
      expect_same(norm(v, 2.0, dims), norm(c, 2.0, dims));
    }
    const Tensor v_empty = zeros({2}, DType::Complex64).as_strided({0, 3}, {huge, 1});
    EXPECT_EQ(norm(v_empty, 2.0, {1}).sizes(), (Shape{0}));
    EXPECT_EQ(var(v_empty, {1}).sizes(), (Shape{0}));
  }
}

TEST(HugeStrideViewsFuzzed, FlipOfAOneElementDim) {
  // flip negates the stride of each flipped dim; INT64_MIN has no negation.
  for (const int64_t huge : kStrides) {
    SCOPED_TRACE(huge);
    const Tensor v = view_with_stride(huge);
    const Tensor c = v.contiguous();
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{1}, {0, 1}, {1, 2}, {-2, 0, 2}}) {
      expect_same(flip(v, dims), flip(c, dims));
    }
    EXPECT_EQ(values_of(flip(v, {0, 1})), (std::vector<float>{4, 5, 2, 3, 0, 1}));
  }
}

TEST(HugeStrideViewsFuzzed, ReductionsOverAOneElementDim) {
  // The reduction loop orders the reduced dims by |stride| (INT64_MIN has none).
  for (const int64_t huge : kStrides) {
    SCOPED_TRACE(huge);
    const Tensor v = view_with_stride(huge);
    const Tensor c = v.contiguous();
    for (const DimList& dims : {DimList{1}, DimList{0, 1}, DimList{1, 2}, DimList{}}) {
      expect_same(sum(v, dims), sum(c, dims));
      expect_same(amax(v, dims), amax(c, dims));
      expect_same(mean(v, dims, true), mean(c, dims, true));
    }
    expect_same(argmax(v, 1), argmax(c, 1));
    expect_same(cumsum(v, 1), cumsum(c, 1));
  }
}

TEST(HugeStrideViewsFuzzed, EmptySliceOfAOneElementDimStaysAddressable) {
  // x[1:] on a one-element dim of stride 2^62 + 1 starts one element past its end: an
  // offset that fits in elements but not in bytes (data_ptr() overflowed). The empty view
  // addresses nothing, so it keeps the base's offset, and ops on it (pad steps through
  // such narrows) run as on its contiguous copy.
  const Tensor v = zeros({2}, DType::UInt64).as_strided({1, 2}, {(int64_t{1} << 62) + 1, 1});
  for (const Tensor& e : {v.slice(0, 1, std::nullopt), v.narrow(0, 1, 0)}) {
    EXPECT_EQ(e.sizes(), (Shape{0, 2}));
    EXPECT_EQ(e.storage_offset(), 0);
    EXPECT_EQ(e.contiguous().sizes(), (Shape{0, 2}));
  }
  EXPECT_EQ(v.slice(0, 0, std::nullopt).sizes(), (Shape{1, 2}));
  // Within bytes, the empty slice's offset is PyTorch's.
  const Tensor small = zeros({2}, DType::UInt64).as_strided({1, 2}, {int64_t{1} << 40, 1});
  EXPECT_EQ(small.slice(0, 1, std::nullopt).storage_offset(), int64_t{1} << 40);
}

TEST(HugeStrideViewsFuzzed, OutputsLaidOutLikeAViewWithNegativeOneElementStrides) {
  // A dense view whose one-element dims carry INT64_MIN: an elementwise result and
  // empty_like take its layout, but new memory cannot have a negative stride (the
  // index_ops fuzzer: add refused what its contiguous copies accepted).
  const Tensor base = arange(Scalar(int64_t{6}), DType::Float32);
  const Tensor v = base.as_strided({2, 1, 3, 1}, {3, INT64_MIN, 1, INT64_MIN});
  ASSERT_TRUE(v.is_non_overlapping_and_dense());
  const Tensor sum = add(v, v);
  EXPECT_EQ(sum.sizes(), v.sizes());
  for (int64_t s : sum.strides()) EXPECT_GE(s, 0);
  EXPECT_EQ(values_of(sum), values_of(add(v.contiguous(), v.contiguous())));
  EXPECT_EQ(values_of(v.clone()), values_of(v.contiguous()));
}

}  // namespace
}  // namespace kiln
