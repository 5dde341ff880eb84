// Views of any rank kiln allows (up to kMaxTensorDims = 64) go through copies,
// elementwise ops and reductions; a 65th dim is refused with a RuntimeError naming the
// op. The views here have 17 dims of size 2 whose strides cannot merge (a fully
// transposed block, so the loops see 17 real dims), padded with size-1 dims to ranks 17,
// 25 and 64; each result is compared with a plain walk over the view's strides.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "kiln/tensor_limits.h"
#include "test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;

constexpr int64_t kRealDims = 17;

// arange(2^17) in `dt` shaped [2]*17, transposed end to end (no two dims merge), with
// size-1 dims spread between them up to `rank`; `shift` rotates the values so two such
// views differ.
Tensor strided_view(int64_t rank, DType dt, int64_t shift = 0) {
  const int64_t n = int64_t{1} << kRealDims;
  Tensor base = remainder(add(arange(Scalar(n), DType::Int64), Scalar(shift)), Scalar(int64_t{1000})).to(dt);
  Tensor v = base.view(Shape(kRealDims, 2));
  Shape reversed(kRealDims);
  for (int64_t d = 0; d < kRealDims; ++d) reversed[d] = kRealDims - 1 - d;
  v = v.permute(reversed);
  for (int64_t d = 0; v.dim() < rank; d = (d + 2) % (v.dim() + 1)) v = v.unsqueeze(d);
  EXPECT_EQ(v.dim(), rank);
  EXPECT_FALSE(v.is_contiguous());
  return v;
}

// The view's elements in row-major order, read through its strides.
template <typename T>
std::vector<T> walk(const Tensor& t) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(t.numel()));
  const T* base = t.data<T>();
  Shape index(t.dim(), 0);
  for (int64_t flat = 0; flat < t.numel(); ++flat) {
    int64_t offset = 0;
    for (int64_t d = 0; d < t.dim(); ++d) offset += index[d] * t.strides()[d];
    out.push_back(base[offset]);
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      if (++index[d] < t.sizes()[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

class HighRank : public ::testing::TestWithParam<int64_t> {};

TEST_P(HighRank, CopyAndContiguousOfANonContiguousView) {
  const Tensor v = strided_view(GetParam(), DType::Float32);
  const std::vector<float> want = walk<float>(v);
  const Tensor c = v.contiguous();
  ASSERT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.sizes(), v.sizes());
  EXPECT_EQ(walk<float>(c), want);
  // copy_ into another non-contiguous view of the same shape, with a cast.
  Tensor dst = strided_view(GetParam(), DType::Float64, 5);
  dst.copy_(v);
  const std::vector<double> got = walk<double>(dst);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], static_cast<double>(want[i])) << i;
  EXPECT_EQ(walk<float>(v.clone()), want);
}

TEST_P(HighRank, ElementwiseOnNonContiguousAndBroadcastViews) {
  const Tensor a = strided_view(GetParam(), DType::Float32);
  const Tensor b = strided_view(GetParam(), DType::Float32, 7);
  const std::vector<float> wa = walk<float>(a), wb = walk<float>(b);
  const std::vector<float> sum = walk<float>(add(a, b));
  const std::vector<float> negated = walk<float>(neg(b));
  for (size_t i = 0; i < wa.size(); ++i) {
    ASSERT_EQ(sum[i], wa[i] + wb[i]) << i;
    ASSERT_EQ(negated[i], -wb[i]) << i;
  }
  // A broadcast operand: one size-2 dim of b collapsed to 1 and expanded back (stride 0).
  int64_t d = 0;
  while (b.sizes()[d] != 2) ++d;
  const Tensor b0 = b.narrow(d, 0, 1).expand(b.sizes());
  const std::vector<float> wb0 = walk<float>(b0);
  const std::vector<float> prod = walk<float>(mul(a, b0));
  for (size_t i = 0; i < wa.size(); ++i) ASSERT_EQ(prod[i], wa[i] * wb0[i]) << i;
  // In place, through the view: a strided output.
  Tensor out = strided_view(GetParam(), DType::Float32, 3);
  const std::vector<float> before = walk<float>(out);
  add_(out, a);
  const std::vector<float> after = walk<float>(out);
  for (size_t i = 0; i < wa.size(); ++i) ASSERT_EQ(after[i], before[i] + wa[i]) << i;
}

TEST_P(HighRank, ReductionsOverAllAndOneDim) {
  const Tensor v = strided_view(GetParam(), DType::Int64);
  const std::vector<int64_t> w = walk<int64_t>(v);
  int64_t total = 0, biggest = w[0];
  for (int64_t x : w) {
    total += x;
    biggest = std::max(biggest, x);
  }
  EXPECT_EQ(sum(v).item().to_int64(), total);
  EXPECT_EQ(amax(v).item().to_int64(), biggest);
  // Over each size-2 dim in turn (the innermost, the outermost and one between).
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < v.dim(); ++d) {
    if (v.sizes()[d] == 2) dims.push_back(d);
  }
  for (int64_t d : {dims.front(), dims[dims.size() / 2], dims.back()}) {
    SCOPED_TRACE(d);
    const Tensor s = sum(v, {d}, /*keepdim=*/true);
    ASSERT_EQ(s.dim(), v.dim());
    // The reference: element i of the input adds to the output element with dim d's index 0.
    int64_t inner = 1;
    for (int64_t k = d + 1; k < v.dim(); ++k) inner *= v.sizes()[k];
    std::vector<int64_t> want(static_cast<size_t>(v.numel() / 2), 0);
    for (int64_t i = 0; i < v.numel(); ++i) {
      const int64_t outer = i / (2 * inner), rest = i % inner;
      want[static_cast<size_t>(outer * inner + rest)] += w[static_cast<size_t>(i)];
    }
    EXPECT_EQ(walk<int64_t>(s), want);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, HighRank, ::testing::Values(int64_t{17}, int64_t{25}, kMaxTensorDims));

TEST(HighRank, ASixtyFifthDimIsRefused) {
  const Shape ones64(kMaxTensorDims, 1);
  Shape ones65(kMaxTensorDims + 1, 1);
  const Tensor t = zeros(ones64);
  const std::string why = "tensors with more than 64 dims are not supported (got 65 dims)";
  expect_error([&] { zeros(ones65); }, ErrorKind::Runtime, "zeros: " + why);
  expect_error([&] { Tensor::empty(ones65); }, ErrorKind::Runtime, "empty: " + why);
  expect_error([&] { t.unsqueeze(0); }, ErrorKind::Runtime, "unsqueeze: " + why);
  expect_error([&] { t.view(ones65); }, ErrorKind::Runtime, "view: " + why);
  expect_error([&] { t.reshape(ones65); }, ErrorKind::Runtime, "reshape: " + why);
  expect_error([&] { t.expand(ones65); }, ErrorKind::Runtime, "expand: " + why);
  expect_error([&] { t.as_strided(ones65, ones65); }, ErrorKind::Runtime, "as_strided: " + why);
  expect_error([&] { t.unflatten(0, {1, 1}); }, ErrorKind::Runtime, why);
}

}  // namespace
}  // namespace kiln
