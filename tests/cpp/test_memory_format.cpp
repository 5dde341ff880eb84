// Memory formats: PyTorch's strides for channels_last / channels_last_3d, the format
// predicates, contiguous/clone/to/empty_like with a format, the strides elementwise
// outputs get from their inputs (TensorIterator's rules), and that values never depend
// on the layout. The strides written here are the ones torch 1.13 gives for the same
// calls (tests/reference/test_memory_format_torch.py checks them against torch itself).
#include <gtest/gtest.h>

#include "core/memory_format.h"
#include "kiln/autograd.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

// Distinct values 0, 1, 2, ... in row-major order, so that a layout mix-up shows.
Tensor iota(const Shape& sizes, DType dtype = DType::Float32) {
  return arange(Scalar(int64_t{0}), Scalar(shape_numel(sizes)), Scalar(int64_t{1}), DType::Float64)
      .to(dtype)
      .view(sizes);
}

// Every element equal (layouts may differ): the logical values, not the memory.
void expect_same_values(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  const Tensor x = a.contiguous().to(DType::Float64), y = b.contiguous().to(DType::Float64);
  const double* p = x.data<double>();
  const double* q = y.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(p[i], q[i]) << "element " << i;
}

TEST(MemoryFormat, ChannelsLastStridesAreTorchs) {
  EXPECT_EQ(Tensor::empty({2, 3, 4, 5}, DType::Float32, kCPU, MemoryFormat::ChannelsLast).strides(),
            (Shape{60, 1, 15, 3}));
  EXPECT_EQ(Tensor::empty({2, 3, 4, 5, 6}, DType::Float32, kCPU, MemoryFormat::ChannelsLast3d).strides(),
            (Shape{360, 1, 90, 18, 3}));
  // No max(size, 1): a 0 size zeroes the strides outside it (torch 1.13: (0, 1, 0, 0)).
  EXPECT_EQ(Tensor::empty({2, 0, 3, 4}, DType::Float32, kCPU, MemoryFormat::ChannelsLast).strides(),
            (Shape{0, 1, 0, 0}));
  EXPECT_EQ(Tensor::empty({2, 3, 0, 4}, DType::Float32, kCPU, MemoryFormat::ChannelsLast).strides(),
            (Shape{0, 1, 12, 3}));
  EXPECT_EQ(Tensor::empty({1, 1, 1, 1}, DType::Float32, kCPU, MemoryFormat::ChannelsLast).strides(),
            (Shape{1, 1, 1, 1}));
  EXPECT_EQ(Tensor::empty({2, 3}, DType::Float32, kCPU, MemoryFormat::Contiguous).strides(), (Shape{3, 1}));
}

TEST(MemoryFormat, WrongRanksAndPreserveAreRefused) {
  expect_error([] { Tensor::empty({2, 3, 4}, DType::Float32, kCPU, MemoryFormat::ChannelsLast); }, ErrorKind::Runtime,
               "required rank 4 tensor to use channels_last format");
  expect_error([] { Tensor::empty({2, 3, 4, 5}, DType::Float32, kCPU, MemoryFormat::ChannelsLast3d); },
               ErrorKind::Runtime, "required rank 5 tensor to use channels_last_3d format");
  expect_error([] { iota({2, 3, 4}).contiguous(MemoryFormat::ChannelsLast); }, ErrorKind::Runtime,
               "required rank 4 tensor to use channels_last format");
  expect_error([] { empty_like(iota({2, 3, 4, 5}), MemoryFormat::ChannelsLast3d); }, ErrorKind::Runtime,
               "required rank 5 tensor to use channels_last_3d format");
  expect_error([] { iota({2, 3, 4, 5}).to(DType::Float64, MemoryFormat::ChannelsLast3d); }, ErrorKind::Runtime,
               "required rank 5 tensor to use channels_last_3d format");
  expect_error([] { iota({2, 3}).t().contiguous(MemoryFormat::Preserve); }, ErrorKind::Runtime,
               "preserve memory format is unsupported by the contiguous operator");
  expect_error([] { Tensor::empty({2}, DType::Float32, kCPU, MemoryFormat::Preserve); }, ErrorKind::Runtime,
               "unsupported memory format option preserve_format");
  expect_error([] { Tensor::empty_strided({2, 3}, {3}); }, ErrorKind::Runtime, "mismatch in length");
  expect_error([] { Tensor::empty_strided({2, 3}, {-1, 1}); }, ErrorKind::Runtime, "negative strides");
  expect_error([] { Tensor::empty_strided({int64_t{1} << 40, int64_t{1} << 40}, {int64_t{1} << 40, 1}); },
               ErrorKind::Runtime, "overflowed");
}

TEST(MemoryFormat, Predicates) {
  const Tensor x = iota({2, 3, 4, 5});
  const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
  EXPECT_TRUE(x.is_contiguous(MemoryFormat::Contiguous));
  EXPECT_FALSE(x.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_FALSE(cl.is_contiguous());
  EXPECT_TRUE(x.is_contiguous(MemoryFormat::Preserve));  // asks is_contiguous(), as in torch
  EXPECT_FALSE(iota({2, 3, 4}).is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_EQ(cl.suggest_memory_format(), MemoryFormat::ChannelsLast);
  EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_TRUE(cl.is_non_overlapping_and_dense());
  EXPECT_TRUE(iota({3, 4}).t().is_non_overlapping_and_dense());
  EXPECT_FALSE(iota({3, 4}).slice(1, 0, 4, 2).is_non_overlapping_and_dense());
  EXPECT_FALSE(iota({3, 1}).expand({3, 4}).is_non_overlapping_and_dense());
  // The ambiguous layouts PyTorch resolves to row-major: N111 and a trivial C stride.
  EXPECT_EQ(iota({4, 1, 1, 1}).suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_EQ(Tensor::empty({4, 1, 1, 1}, DType::Float32, kCPU, MemoryFormat::ChannelsLast).suggest_memory_format(),
            MemoryFormat::Contiguous);
  // N1H1: [H, 1, 1, 1] channels-last strides vs [H, H, 1, 1] row-major ones.
  EXPECT_EQ(Tensor::empty({2, 1, 3, 1}, DType::Float32, kCPU, MemoryFormat::ChannelsLast).suggest_memory_format(),
            MemoryFormat::ChannelsLast);
  EXPECT_EQ(iota({2, 1, 3, 1}).suggest_memory_format(), MemoryFormat::Contiguous);
  const Tensor cl3 = iota({2, 3, 2, 4, 5}).contiguous(MemoryFormat::ChannelsLast3d);
  EXPECT_EQ(cl3.strides(), (Shape{120, 1, 60, 15, 3}));
  EXPECT_TRUE(cl3.is_contiguous(MemoryFormat::ChannelsLast3d));
  EXPECT_EQ(cl3.suggest_memory_format(), MemoryFormat::ChannelsLast3d);
}

TEST(MemoryFormat, CopiesKeepValuesInEveryFormat) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int32}) {
    const Tensor x = iota({2, 3, 4, 5}, dt);
    const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
    EXPECT_EQ(cl.strides(), (Shape{60, 1, 15, 3}));
    expect_same_values(cl, x);
    EXPECT_TRUE(cl.contiguous(MemoryFormat::ChannelsLast).is_same(cl));  // already there: no copy
    expect_same_values(cl.contiguous(), x);
    EXPECT_TRUE(cl.contiguous().is_contiguous());
    // Preserve keeps a dense input's strides exactly.
    EXPECT_EQ(cl.clone(MemoryFormat::Preserve).strides(), cl.strides());
    expect_same_values(cl.clone(MemoryFormat::Preserve), x);
    EXPECT_TRUE(cl.clone().is_contiguous());  // C++'s clone() is row-major
    const Tensor wide = cl.to(DType::Float64, MemoryFormat::Preserve);
    EXPECT_EQ(wide.strides(), cl.strides());
    expect_same_values(wide, x);
  }
}

TEST(MemoryFormat, PreserveOfNonDenseKeepsTheDimOrder) {
  // A sliced transpose: torch gives (1, 3) for clone, empty_like and to.
  const Tensor b = iota({4, 6}).slice(1, 0, 6, 2).t();
  EXPECT_EQ(b.clone(MemoryFormat::Preserve).strides(), (Shape{1, 3}));
  EXPECT_EQ(empty_like(b, MemoryFormat::Preserve).strides(), (Shape{1, 3}));
  EXPECT_EQ(b.to(DType::Float64, MemoryFormat::Preserve).strides(), (Shape{1, 3}));
  expect_same_values(b.clone(MemoryFormat::Preserve), b);
  // A channels-last slice stays channels-last.
  const Tensor cl_slice = iota({2, 3, 8, 5}).contiguous(MemoryFormat::ChannelsLast).slice(2, 0, 8, 2);
  EXPECT_EQ(cl_slice.clone(MemoryFormat::Preserve).strides(), (Shape{60, 1, 15, 3}));
  expect_same_values(cl_slice.clone(MemoryFormat::Preserve), cl_slice);
  EXPECT_EQ(dense_strides_like({6, 5, 4, 3, 2}, {6, 0, 120, 0, 1}), (Shape{6, 36, 180, 2, 1}));  // PyTorch's own example
}

TEST(MemoryFormat, ToAliasesLikeTorch) {
  const Tensor cl = iota({2, 3, 4, 5}).contiguous(MemoryFormat::ChannelsLast);
  EXPECT_TRUE(cl.to(DType::Float32, MemoryFormat::Preserve).is_same(cl));
  EXPECT_TRUE(cl.to(DType::Float32, MemoryFormat::ChannelsLast).is_same(cl));
  const Tensor rm = cl.to(DType::Float32, MemoryFormat::Contiguous);
  EXPECT_FALSE(rm.is_same(cl));
  EXPECT_TRUE(rm.is_contiguous());
  // torch's to() compares with suggest_memory_format: a row-major slice is returned as is.
  const Tensor s = iota({4, 6}).slice(1, 0, 6, 2);
  EXPECT_TRUE(s.to(DType::Float32, MemoryFormat::Contiguous).is_same(s));
}

TEST(MemoryFormat, LikeOpsFill) {
  const Tensor cl = iota({2, 3, 4, 5}).contiguous(MemoryFormat::ChannelsLast);
  const Tensor z = zeros_like(cl, MemoryFormat::Preserve);
  EXPECT_EQ(z.strides(), cl.strides());
  expect_same_values(z, zeros({2, 3, 4, 5}));
  const Tensor o = ones_like(cl, MemoryFormat::Preserve, DType::Float64);
  EXPECT_EQ(o.dtype(), DType::Float64);
  EXPECT_EQ(o.strides(), cl.strides());
  expect_same_values(o, ones({2, 3, 4, 5}));
  const Tensor f = full_like(iota({2, 3, 4, 5}), Scalar(2.5), MemoryFormat::ChannelsLast);
  EXPECT_EQ(f.strides(), cl.strides());
  expect_same_values(f, full({2, 3, 4, 5}, Scalar(2.5)));
  EXPECT_TRUE(empty_like(cl, MemoryFormat::Contiguous).is_contiguous());
  EXPECT_TRUE(empty_like(cl).is_contiguous());  // the C++ overload without a format is row-major
}

// Elementwise outputs: the strides torch 1.13 gives for the same calls.
TEST(MemoryFormat, ElementwiseOutputsFollowTheInputs) {
  const Tensor x = iota({2, 3, 4, 5});
  const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
  const Tensor bias = iota({3, 1, 1});
  EXPECT_EQ(add(cl, bias).strides(), (Shape{60, 1, 15, 3}));
  EXPECT_EQ(add(cl, x).strides(), (Shape{60, 1, 15, 3}));  // the first input decides
  EXPECT_EQ(add(x, cl).strides(), (Shape{60, 20, 5, 1}));
  EXPECT_EQ(sin(cl).strides(), (Shape{60, 1, 15, 3}));
  EXPECT_EQ(mul(cl, Scalar(2.0)).strides(), (Shape{60, 1, 15, 3}));
  EXPECT_EQ(gt(cl, Scalar(3.0)).strides(), (Shape{60, 1, 15, 3}));
  const Tensor t = iota({3, 4}).t();
  EXPECT_EQ(add(t, Scalar(1.0)).strides(), (Shape{1, 4}));
  EXPECT_EQ(add(iota({4, 6}).slice(1, 0, 6, 2).t(), Scalar(1.0)).strides(), (Shape{1, 3}));
  EXPECT_EQ(add(iota({2, 3}), iota({3})).strides(), (Shape{3, 1}));  // the hot path
  const Tensor cl3 = iota({2, 3, 2, 4, 5}).contiguous(MemoryFormat::ChannelsLast3d);
  EXPECT_EQ(mul(cl3, cl3).strides(), cl3.strides());
  // Values never depend on the layout.
  expect_same_values(add(cl, bias), add(x, bias));
  expect_same_values(add(cl, x), add(x, x));
  expect_same_values(sin(cl), sin(x));
  expect_same_values(mul(cl3, cl3), mul(cl3.contiguous(), cl3.contiguous()));
  expect_same_values(add(t, Scalar(1.0)), add(t.contiguous(), Scalar(1.0)));
}

// Sizes around the SIMD width and the loop chunk, in channels-last and transposed
// layouts, against the row-major result for every float dtype.
TEST(MemoryFormat, ElementwiseValuesAtEdgeSizes) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    for (int64_t c : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{17}}) {
      for (int64_t w : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{33}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " C=" + std::to_string(c) + " W=" + std::to_string(w));
        const Tensor x = iota({2, c, 3, w}, dt);
        const Tensor y = add(iota({2, c, 3, w}, dt), Scalar(0.5));
        const Tensor xc = x.contiguous(MemoryFormat::ChannelsLast);
        const Tensor yc = y.contiguous(MemoryFormat::ChannelsLast);
        expect_same_values(mul(xc, yc), mul(x, y));
        expect_same_values(neg(xc), neg(x));
        expect_same_values(sub(xc, y), sub(x, y));
      }
    }
  }
  const Tensor empty = Tensor::empty({2, 0, 3, 4}, DType::Float32, kCPU, MemoryFormat::ChannelsLast);
  EXPECT_EQ(add(empty, empty).numel(), 0);
}

TEST(MemoryFormat, RecordedCopiesKeepTheFormatAndTheGradient) {
  Tensor x = iota({2, 3, 4, 5}, DType::Float64);
  x.requires_grad_();
  const Tensor y = x.contiguous(MemoryFormat::ChannelsLast);
  EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(y.requires_grad());
  const Tensor z = mul(y, Scalar(3.0));
  EXPECT_TRUE(z.is_contiguous(MemoryFormat::ChannelsLast));
  const Tensor g = ones({2, 3, 4, 5}, DType::Float64);
  const auto grads = autograd::grad({z}, {x}, {g});
  expect_same_values(grads[0], full({2, 3, 4, 5}, Scalar(3.0), DType::Float64));
  const Tensor w = x.to(DType::Float32, MemoryFormat::ChannelsLast);
  EXPECT_TRUE(w.is_contiguous(MemoryFormat::ChannelsLast));
  const auto gw = autograd::grad({w}, {x}, {ones({2, 3, 4, 5})});
  expect_same_values(gw[0], ones({2, 3, 4, 5}, DType::Float64));
  const std::string mismatch = autograd::gradcheck_mismatch(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{mul(in[0].clone(MemoryFormat::ChannelsLast), in[0])};
      },
      {x});
  EXPECT_EQ(mismatch, "");
}

TEST(MemoryFormat, Names) {
  EXPECT_EQ(memory_format_name(MemoryFormat::ChannelsLast), "channels_last");
  EXPECT_EQ(memory_format_name(MemoryFormat::ChannelsLast3d), "channels_last_3d");
  EXPECT_EQ(memory_format_name(MemoryFormat::Contiguous), "contiguous_format");
  EXPECT_EQ(memory_format_name(MemoryFormat::Preserve), "preserve_format");
}

}  // namespace
}  // namespace kiln
