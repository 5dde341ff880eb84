// Views share storage and follow PyTorch's geometry rules; copies cast and broadcast.
#include <gtest/gtest.h>

#include "kiln/allocator.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"

using namespace kiln;

namespace {

// Row-major iota as float32: element value == flat index.
Tensor iota(const Shape& s) { return arange(Scalar(shape_numel(s)), DType::Float32).view(s); }

float get(const Tensor& t, const Shape& idx) { return static_cast<float>(t.at(idx).to_double()); }

}  // namespace

TEST(TensorViews, ViewAndReshape) {
  Tensor a = iota({2, 3, 4});
  Tensor v = a.view({6, 4});
  EXPECT_EQ(v.storage(), a.storage());
  EXPECT_EQ(get(v, {5, 3}), 23);
  EXPECT_EQ(a.view({-1}).sizes(), (Shape{24}));
  EXPECT_EQ(a.view({4, -1}).sizes(), (Shape{4, 6}));
  EXPECT_THROW(a.view({5, -1}), Error);
  EXPECT_THROW(a.view({-1, -1}), Error);
  // A transposed tensor cannot be flattened by a view, but reshape copies.
  Tensor t = a.transpose(1, 2);
  EXPECT_THROW(t.view({24}), Error);
  Tensor r = t.reshape({24});
  EXPECT_NE(r.storage(), a.storage());
  EXPECT_EQ(get(r, {1}), 4);  // t[0,0,1] == a[0,1,0]
  // Splitting a dim of a non-contiguous tensor is still a view.
  Tensor s = a.transpose(0, 2).view({2, 2, 3, 2});
  EXPECT_EQ(s.storage(), a.storage());
  EXPECT_EQ(get(s, {1, 1, 2, 1}), get(a, {1, 2, 3}));
  // Empty tensors view to anything with zero elements.
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.view({3, 0, 5}).sizes(), (Shape{3, 0, 5}));
}

TEST(TensorViews, PermuteTransposeSelectNarrow) {
  Tensor a = iota({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(get(p, {3, 1, 2}), get(a, {1, 2, 3}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_TRUE(p.contiguous().is_contiguous());
  EXPECT_EQ(get(p.contiguous(), {3, 1, 2}), 23);
  EXPECT_THROW(a.permute({0, 0, 1}), Error);
  EXPECT_THROW(a.permute({0, 1}), Error);
  Tensor sel = a.select(1, -1);
  EXPECT_EQ(sel.sizes(), (Shape{2, 4}));
  EXPECT_EQ(get(sel, {1, 2}), get(a, {1, 2, 2}));
  try {
    a.select(1, 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
  }
  Tensor n = a.narrow(2, 1, 2);
  EXPECT_EQ(n.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(get(n, {1, 2, 1}), get(a, {1, 2, 2}));
  EXPECT_THROW(a.narrow(2, 3, 2), Error);
  EXPECT_THROW(a.t(), Error);  // t() is for <= 2-D tensors
  EXPECT_EQ(a.select(0, 0).t().sizes(), (Shape{4, 3}));
}

TEST(TensorViews, SliceWithStepAndClamping) {
  Tensor a = iota({10});
  Tensor s = a.slice(0, 1, 8, 3);  // 1, 4, 7
  ASSERT_EQ(s.sizes(), (Shape{3}));
  EXPECT_EQ(get(s, {2}), 7);
  EXPECT_EQ(a.slice(0, -3, std::nullopt).sizes(), (Shape{3}));
  EXPECT_EQ(a.slice(0, 20, 30).sizes(), (Shape{0}));
  EXPECT_EQ(a.slice(0, 5, 2).sizes(), (Shape{0}));
  EXPECT_THROW(a.slice(0, 0, 5, 0), Error);
  // A slice of a slice composes offsets and strides.
  Tensor ss = a.slice(0, 1, std::nullopt, 2).slice(0, 1, std::nullopt, 2);  // 3, 7
  EXPECT_EQ(ss.sizes(), (Shape{2}));
  EXPECT_EQ(get(ss, {1}), 7);
}

TEST(TensorViews, ExpandSqueezeUnsqueezeFlatten) {
  Tensor a = iota({3, 1});
  Tensor e = a.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(get(e, {1, 2, 3}), 2);
  EXPECT_EQ(a.expand({-1, 5}).sizes(), (Shape{3, 5}));
  EXPECT_THROW(a.expand({4, 4}), Error);
  EXPECT_THROW(a.expand({3}), Error);
  EXPECT_EQ(a.squeeze().sizes(), (Shape{3}));
  EXPECT_EQ(a.squeeze(0).sizes(), (Shape{3, 1}));
  EXPECT_EQ(a.squeeze(-1).sizes(), (Shape{3}));
  EXPECT_EQ(a.unsqueeze(0).sizes(), (Shape{1, 3, 1}));
  EXPECT_EQ(a.unsqueeze(-1).sizes(), (Shape{3, 1, 1}));
  EXPECT_THROW(a.unsqueeze(4), Error);
  Tensor b = iota({2, 3, 4});
  EXPECT_EQ(b.flatten().sizes(), (Shape{24}));
  EXPECT_EQ(b.flatten(1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(b.flatten(0, 1).sizes(), (Shape{6, 4}));
  EXPECT_EQ(b.unflatten(2, {2, -1}).sizes(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(zeros({}).flatten().sizes(), (Shape{1}));
  EXPECT_EQ(b.movedim(0, 2).sizes(), (Shape{3, 4, 2}));
}

TEST(TensorViews, AsStridedChecksBounds) {
  Tensor a = iota({12});
  Tensor w = a.as_strided({3, 4}, {1, 2}, 2);  // overlapping windows
  EXPECT_EQ(get(w, {2, 3}), 2 + 2 + 6);
  EXPECT_THROW(a.as_strided({4, 4}, {4, 1}, 0), Error);
  EXPECT_THROW(a.as_strided({2}, {1}, -1), Error);
  EXPECT_EQ(a.as_strided({0, 100}, {100, 1}).numel(), 0);
}

TEST(TensorViews, CopyCastsAndBroadcasts) {
  Tensor dst = zeros({2, 3}, DType::Int32);
  dst.copy_(arange(Scalar(int64_t{3}), DType::Float64));
  EXPECT_EQ(dst.at({1, 2}).to_int64(), 2);
  // Copy into a non-contiguous destination.
  Tensor big = zeros({4, 4});
  big.slice(0, 0, std::nullopt, 2).slice(1, 1, std::nullopt, 2).copy_(full({2, 2}, Scalar(7.5)));
  EXPECT_EQ(get(big, {2, 3}), 7.5f);
  EXPECT_EQ(get(big, {1, 1}), 0.f);
  EXPECT_THROW(dst.copy_(zeros({4})), Error);
  Tensor bf = iota({5}).to(DType::BFloat16);
  EXPECT_EQ(bf.dtype(), DType::BFloat16);
  EXPECT_EQ(bf.to(DType::Float32).at({4}).to_double(), 4.0);
  Tensor c = full({2}, Scalar(std::complex<double>(1, -2)));
  EXPECT_EQ(c.dtype(), DType::Complex64);
  EXPECT_EQ(c.to(DType::Float32).at({0}).to_double(), 1.0);  // real part
  Tensor cl = iota({3});
  Tensor cl2 = cl.clone();
  cl2.fill_(Scalar(1.0));
  EXPECT_EQ(get(cl, {2}), 2.f);
}

TEST(TensorViews, ItemAndPrint) {
  EXPECT_EQ(full({}, Scalar(int64_t{5})).item().to_int64(), 5);
  EXPECT_EQ(full({1, 1}, Scalar(true)).item().to_bool(), true);
  EXPECT_THROW(zeros({2}).item(), Error);
  EXPECT_EQ(arange(Scalar(int64_t{3})).str(), "tensor([0, 1, 2], shape=[3], dtype=int64)");
}

TEST(TensorViews, UndefinedTensorIsAnError) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_THROW(u.sizes(), Error);
}

TEST(Allocator, ReusesFreedBlocksAndTracksPeaks) {
  empty_cache();
  reset_peak_memory_stats();
  AllocatorStats s0 = allocator_stats();
  void* p = nullptr;
  {
    Tensor a = empty({1 << 20});  // 4 MiB
    p = a.data_ptr();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    AllocatorStats s1 = allocator_stats();
    EXPECT_GE(s1.allocated_bytes - s0.allocated_bytes, 4 << 20);
    EXPECT_GE(s1.peak_allocated_bytes, s1.allocated_bytes);
  }
  AllocatorStats s2 = allocator_stats();
  EXPECT_EQ(s2.allocated_bytes, s0.allocated_bytes);
  EXPECT_GE(s2.reserved_bytes, s0.reserved_bytes + (4 << 20));  // kept cached
  Tensor b = empty({1 << 20});
  EXPECT_EQ(b.data_ptr(), p);  // served from the cache
  EXPECT_GT(allocator_stats().num_cache_hits, s0.num_cache_hits);
  reset_peak_memory_stats();
  EXPECT_EQ(allocator_stats().peak_allocated_bytes, allocator_stats().allocated_bytes);
  Tensor z = empty({0});
  EXPECT_EQ(z.nbytes(), 0u);
}
