// The constant-pad kernel (backend/pad.h) through pad(): a scalar reference for every
// element width (1, 2, 4, 8 and 16 bytes), positive, negative and mixed pads, inputs
// that are strided, transposed or channels-last (whose output stays channels-last, as
// in PyTorch), widths around the SIMD lane count, a window cropped away entirely, and
// that repeated calls reuse memory (reserved bytes do not grow).
#include <gtest/gtest.h>

#include <complex>

#include "kiln/allocator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/pad.h"
#include "test_util.h"

namespace kiln {
namespace {

// The value pad(x, pads, "constant", value) must hold at output `index`.
Scalar reference_at(const Tensor& x, const std::vector<int64_t>& pads, const Shape& index, double value) {
  const int64_t k = static_cast<int64_t>(pads.size()) / 2;
  Shape src = index;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = x.dim() - 1 - i;
    src[d] = index[d] - pads[2 * i];
    if (src[d] < 0 || src[d] >= x.size(d)) return Scalar(value);
  }
  return x.at(src);
}

void expect_matches_reference(const Tensor& x, const std::vector<int64_t>& pads, double value = 0.0) {
  SCOPED_TRACE(shape_to_string(Shape(pads.begin(), pads.end())) + " of " + x.describe() + " strides " +
               shape_to_string(x.strides()));
  const Tensor y = pad(x, pads, "constant", value);
  Shape expected = x.sizes();
  for (size_t i = 0; i < pads.size() / 2; ++i) expected[x.dim() - 1 - i] += pads[2 * i] + pads[2 * i + 1];
  ASSERT_EQ(y.sizes(), expected);
  ASSERT_EQ(y.dtype(), x.dtype());
  for (int64_t flat = 0; flat < y.numel(); ++flat) {
    Shape index(y.dim());
    for (int64_t d = y.dim() - 1, rest = flat; d >= 0; --d) {
      index[d] = rest % y.size(d);
      rest /= y.size(d);
    }
    const Scalar want = reference_at(x, pads, index, value);
    const Scalar got = y.at(index);
    if (is_complex(x.dtype())) {
      ASSERT_EQ(got.to_complex(), Tensor::from_scalar(want).to(x.dtype()).item().to_complex()) << flat;
    } else {
      ASSERT_EQ(got.to_double(), Tensor::from_scalar(want).to(x.dtype()).item().to_double()) << flat;
    }
  }
}

Tensor iota(const Shape& sizes, DType dtype) {
  return arange(Scalar(int64_t{0}), Scalar(shape_numel(sizes)), Scalar(int64_t{1}), DType::Float64)
      .to(dtype)
      .view(sizes);
}

TEST(PadKernel, EveryElementWidth) {
  for (DType dt : {DType::Bool, DType::UInt8, DType::Float16, DType::BFloat16, DType::Int32, DType::Float32,
                   DType::Float64, DType::Int64, DType::Complex64, DType::Complex128}) {
    const Tensor x = dt == DType::Bool ? gt(iota({2, 3, 5}, DType::Float32), Scalar(6.0)) : iota({2, 3, 5}, dt);
    expect_matches_reference(x, {1, 2}, 1.0);
    expect_matches_reference(x, {2, 0, 1, 1}, 0.0);
    expect_matches_reference(x, {-1, 2, 0, -1, 1, 0}, 1.0);
  }
}

TEST(PadKernel, LayoutsAndEdgeWidths) {
  for (int64_t w : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{15}, int64_t{16}, int64_t{17}}) {
    const Tensor x = iota({2, 3, 4, w}, DType::Float32);
    expect_matches_reference(x, {1, 1, 1, 1}, -2.5);
    expect_matches_reference(x.transpose(2, 3), {3, 0, 0, 2});
    expect_matches_reference(x.slice(3, 0, w, 2), {2, 1, 1, 0, 1, 1});
    const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
    const Tensor y = pad(cl, {1, 1, 1, 1});
    EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast));  // torch 1.13 keeps it
    expect_matches_reference(cl, {1, 1, 1, 1}, 3.0);
    expect_matches_reference(cl, {0, -1, 2, 0, 1, 0});
  }
  const Tensor x5 = iota({1, 3, 2, 4, 5}, DType::Float32).contiguous(MemoryFormat::ChannelsLast3d);
  EXPECT_TRUE(pad(x5, {1, 1, 1, 1, 2, 0}).is_contiguous(MemoryFormat::ChannelsLast3d));
  expect_matches_reference(x5, {1, 1, 1, 1, 2, 0});
}

TEST(PadKernel, CroppedAwayAndEmpty) {
  const Tensor x = iota({2, 3, 4}, DType::Float32);
  // The whole last dim cropped, then padded back: all fill.
  expect_matches_reference(x, {-4, 2}, 7.0);
  expect_matches_reference(x, {1, 1, -3, 0}, 7.0);
  EXPECT_EQ(pad(x, {-2, -2}).numel(), 0);
  EXPECT_EQ(pad(Tensor::empty({0, 3}), {1, 1}).sizes(), (Shape{0, 5}));
  expect_matches_reference(Tensor::empty({2, 0}), {1, 2}, 4.0);
  expect_matches_reference(iota({}, DType::Float32), {}, 0.0);
  expect_matches_reference(iota({5}, DType::Float32), {0, 0}, 0.0);
}

TEST(PadKernel, RepeatedCallsDoNotGrowReservedMemory) {
  const Tensor x = iota({1, 8, 3, 40, 50}, DType::Float32);
  const std::vector<int64_t> pads{1, 1, 1, 1, 2, 0};
  pad(x, pads);
  pad(x, pads);
  const int64_t after_two = allocator_stats().reserved_bytes;
  for (int i = 2; i < 100; ++i) pad(x, pads);
  EXPECT_EQ(allocator_stats().reserved_bytes, after_two);
}

}  // namespace
}  // namespace kiln
