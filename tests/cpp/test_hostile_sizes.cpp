// Hostile sizes: element counts, byte counts, strides and offsets that overflow 64 bits
// or exceed any memory. Each must raise a kiln::Error naming the op (never wrap into a
// small allocation, pass a bounds check it should fail, or return 0/NaN), and valid
// edge cases next to them must keep their exact results.
//
// No test allocates more than a few bytes: every size here overflows, or exceeds what the
// address space can map, before anything is committed.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "kiln/allocator.h"
#include "kiln/context.h"
#include "kiln/generator.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "kiln/tensor.h"
#include "sanitizer_build.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t k2_32 = int64_t{1} << 32;

// A one-element float32 tensor broadcast to `sizes` (stride 0 everywhere: no memory).
Tensor broadcast_one(const Shape& sizes) { return ones({1}).reshape(Shape(sizes.size(), 1)).expand(sizes); }

bool sanitizer_allocator() {
#if defined(KILN_TEST_ASAN) || defined(KILN_TEST_TSAN)
  return true;
#else
  return false;
#endif
}

TEST(HostileSizes, CheckedArithmeticHelpers) {
  int64_t r = 0;
  EXPECT_TRUE(checked_mul(int64_t{3}, int64_t{4}, &r));
  EXPECT_EQ(r, 12);
  EXPECT_FALSE(checked_mul(k2_32, k2_32, &r));
  EXPECT_FALSE(checked_add(kMax, int64_t{1}, &r));
  size_t u = 0;
  EXPECT_FALSE(checked_mul(size_t{1} << 62, size_t{4}, &u));
  expect_error([] { checked_mul(k2_32, k2_32, "my_op"); }, ErrorKind::Runtime, "my_op: integer overflow");
  expect_error([] { checked_add(kMax, int64_t{1}, "my_op"); }, ErrorKind::Runtime, "my_op: integer overflow");
  EXPECT_EQ(ceil_div(kMax, 2), int64_t{1} << 62);  // (a + b - 1) / b would wrap
  EXPECT_EQ(ceil_div(0, 7), 0);
  EXPECT_EQ(ceil_div(7, 7), 1);
  EXPECT_EQ(ceil_div(8, 7), 2);
}

TEST(HostileSizes, ShapeNumelIsCheckedAndZeroWins) {
  expect_error([] { shape_numel({k2_32, k2_32}); }, ErrorKind::Runtime, "numel: integer multiplication overflow");
  expect_error([] { shape_numel({k2_32, k2_32}, "my_op"); }, ErrorKind::Runtime, "my_op: numel");
  EXPECT_EQ(shape_numel({k2_32, k2_32, 0}), 0);  // PyTorch counts it as empty too
  EXPECT_EQ(shape_numel({0, k2_32, k2_32}), 0);
  int64_t n = -1;
  EXPECT_FALSE(try_shape_numel({k2_32, k2_32}, &n));
  EXPECT_TRUE(try_shape_numel({k2_32, 2}, &n));
  EXPECT_EQ(n, k2_32 * 2);
}

TEST(HostileSizes, CreationWithOverflowingSizesRaisesNamingTheOp) {
  // Once numel() == 0 and writes through an empty allocation.
  expect_error([] { zeros({k2_32, k2_32}); }, ErrorKind::Runtime,
               "zeros: Storage size calculation overflowed with sizes=[4294967296, 4294967296]");
  // 2^63 - 1 float32 elements: the byte count wraps to a tiny one.
  expect_error([] { Tensor::empty({kMax}); }, ErrorKind::Runtime, "empty: Storage size calculation overflowed");
  expect_error([] { empty({kMax}, DType::UInt8); }, ErrorKind::Runtime, "you tried to allocate 9223372036854775807 bytes");
  expect_error([] { full({int64_t{1} << 61}, Scalar(int64_t{7}), DType::Int64); }, ErrorKind::Runtime,
               "full: Storage size calculation overflowed");
  expect_error([] { ones({k2_32, k2_32}); }, ErrorKind::Runtime, "ones: Storage size calculation overflowed");
  expect_error([] { eye(k2_32, k2_32); }, ErrorKind::Runtime, "eye: Storage size calculation overflowed");
  expect_error([] { rand({k2_32, k2_32}); }, ErrorKind::Runtime, "rand: Storage size calculation overflowed");
  expect_error([] { randn({k2_32, k2_32}); }, ErrorKind::Runtime, "randn: Storage size calculation overflowed");
  expect_error([] { randint(0, 10, {k2_32, k2_32}); }, ErrorKind::Runtime,
               "randint: Storage size calculation overflowed");
  // Strides of an empty tensor: [0, 2^40, 2^40] has numel 0 but its first stride would
  // be 2^80 (PyTorch refuses it too). With the 0 innermost, the strides stay small.
  const int64_t big = int64_t{1} << 40;
  expect_error([&] { Tensor::empty({0, big, big}); }, ErrorKind::Runtime, "empty: Stride calculation overflowed");
  const Tensor flat = Tensor::empty({big, big, 0});
  EXPECT_EQ(flat.numel(), 0);
  EXPECT_EQ(flat.strides(), Shape({big, 1, 1}));
}

TEST(HostileSizes, RandomOpsLeaveTheGeneratorAloneOnBadSizes) {
  Generator g(1234);
  const uint64_t before = g.advance(0);
  EXPECT_THROW(rand({k2_32, k2_32}, DType::Float32, &g), Error);
  EXPECT_THROW(randn({-1}, DType::Float32, &g), Error);
  EXPECT_EQ(g.advance(0), before);
}

TEST(HostileSizes, ArangeAndLinspaceCountsCannotWrap) {
  expect_error([] { arange(Scalar(int64_t{0}), Scalar(int64_t{1} << 62)); }, ErrorKind::Runtime,
               "arange: Storage size calculation overflowed");
  expect_error([] { arange(Scalar(std::numeric_limits<int64_t>::min()), Scalar(kMax)); }, ErrorKind::Runtime,
               "arange: invalid size, possible overflow?");
  expect_error([] { arange(Scalar(0.0), Scalar(1e300), Scalar(1e-300)); }, ErrorKind::Runtime,
               "arange: invalid size, possible overflow?");
  expect_error([] { arange(Scalar(0.0), Scalar(0x1p62)); }, ErrorKind::Runtime,
               "arange: Storage size calculation overflowed");
  // 1 apart, but equal as doubles: the sign check must be exact.
  expect_error([] { arange(Scalar((int64_t{1} << 62) + 1), Scalar(int64_t{1} << 62)); }, ErrorKind::Runtime,
               "inconsistent with step sign");
  expect_error([] { linspace(Scalar(0.0), Scalar(1.0), int64_t{1} << 62); }, ErrorKind::Runtime,
               "linspace: Storage size calculation overflowed");

  // A range spanning all of int64 in 4 steps: start + i * step wraps in between.
  const Tensor wide = arange(Scalar(std::numeric_limits<int64_t>::min()), Scalar(kMax), Scalar(int64_t{1} << 62));
  ASSERT_EQ(wide.numel(), 4);
  EXPECT_EQ(wide.at({0}).to_int64(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(wide.at({1}).to_int64(), -(int64_t{1} << 62));
  EXPECT_EQ(wide.at({2}).to_int64(), 0);
  EXPECT_EQ(wide.at({3}).to_int64(), int64_t{1} << 62);
  const Tensor down = arange(Scalar(kMax), Scalar(kMax - 5), Scalar(int64_t{-2}));
  ASSERT_EQ(down.numel(), 3);
  EXPECT_EQ(down.at({2}).to_int64(), kMax - 4);
}

TEST(HostileSizes, AllocatorRefusesInKilnsWords) {
  expect_error([] { allocate_bytes(std::numeric_limits<size_t>::max(), "my_op"); }, ErrorKind::Runtime,
               "my_op: not enough memory: you tried to allocate 18446744073709551615 bytes");
  expect_error([] { allocate_bytes(kMaxAllocationBytes + 1); }, ErrorKind::Runtime, "not enough memory");
  // 2^61 bytes fits ptrdiff_t, so it reaches the allocator, which refuses it at once.
  expect_error([] { empty({int64_t{1} << 61}, DType::UInt8); }, ErrorKind::Runtime,
               "empty: not enough memory: you tried to allocate 2305843009213693952 bytes");
  EXPECT_EQ(allocate_bytes(0), nullptr);
}

TEST(HostileSizes, AllocatorReportsWhatTheSystemRefuses) {
  // kMaxAllocationBytes itself passes kiln's bound, but no 47- or 48-bit user address
  // space can map it: the system refuses and kiln reports it. (Sanitizer allocators abort
  // on such sizes unless told to return null, so they skip this one.)
  if (sanitizer_allocator()) GTEST_SKIP() << "sanitizer allocator";
  const AllocatorStats before = allocator_stats();
  expect_error([] { allocate_bytes(kMaxAllocationBytes, "my_op"); }, ErrorKind::Runtime,
               "my_op: not enough memory: you tried to allocate 281474976710656 bytes");
  EXPECT_EQ(allocator_stats().allocated_bytes, before.allocated_bytes);
  // The allocator still works afterwards.
  void* p = allocate_bytes(1000);
  ASSERT_NE(p, nullptr);
  free_bytes(p, 1000);
}

TEST(HostileSizes, ScratchRequestsAreBounded) {
  expect_error([] { current_context().scratch(0, std::numeric_limits<size_t>::max()); }, ErrorKind::Runtime,
               "not enough memory");
}

TEST(HostileSizes, ExpandBeyondInt64ElementsRaises) {
  // 2^64 elements: numel() used to wrap to 0, and sum/contiguous then read nothing.
  expect_error([] { broadcast_one({k2_32, k2_32}); }, ErrorKind::Runtime,
               "expand: numel: integer multiplication overflow: size [4294967296, 4294967296]");
  // An empty expansion stays fine, however large its other sizes.
  EXPECT_EQ(broadcast_one({0, k2_32, k2_32}).numel(), 0);
}

TEST(HostileSizes, MaterialisingAHugeBroadcastViewRaises) {
  // 2^62 elements: a valid view (no memory), but 2^64 bytes to materialise.
  const Tensor huge = broadcast_one({int64_t{1} << 31, int64_t{1} << 31});
  EXPECT_EQ(huge.numel(), int64_t{1} << 62);
  expect_error([&] { huge.contiguous(); }, ErrorKind::Runtime, "Storage size calculation overflowed");
  expect_error([&] { huge.clone(); }, ErrorKind::Runtime, "Storage size calculation overflowed");
  expect_error([&] { add(huge, huge); }, ErrorKind::Runtime, "Storage size calculation overflowed");
  expect_error([&] { huge.to(DType::Float64); }, ErrorKind::Runtime, "Storage size calculation overflowed");
  expect_error([&] { zeros_like(huge); }, ErrorKind::Runtime, "zeros_like: Storage size calculation overflowed");
  expect_error([&] { huge.nbytes(); }, ErrorKind::Runtime, "nbytes");
  // 2^60 elements, 2^62 bytes: fits ptrdiff_t, then the allocator refuses.
  const Tensor big = broadcast_one({int64_t{1} << 30, int64_t{1} << 30});
  EXPECT_EQ(big.nbytes(), size_t{1} << 62);
  expect_error([&] { big.contiguous(); }, ErrorKind::Runtime, "you tried to allocate 4611686018427387904 bytes");
  expect_error([&] { mul(big, Scalar(2.0)); }, ErrorKind::Runtime, "you tried to allocate 4611686018427387904 bytes");
}

TEST(HostileSizes, BroadcastBeyondInt64ElementsRaisesNamingTheOp) {
  const Tensor col = broadcast_one({k2_32, 1});
  const Tensor row = broadcast_one({1, k2_32});
  expect_error([&] { add(col, row); }, ErrorKind::Runtime, "numel: integer multiplication overflow");
  expect_error([&] { mul(col, row); }, ErrorKind::Runtime, "broadcast to [4294967296, 4294967296]");
}

TEST(HostileSizes, MatmulBatchTooLargeFailsBeforeItsOffsetTables) {
  const Tensor a = broadcast_one({int64_t{1} << 24, 1, 1, 1});
  const Tensor b = broadcast_one({1, int64_t{1} << 24, 1, 1});
  // 2^48 matrices of one float32: 2^50 bytes of output.
  expect_error([&] { matmul(a, b); }, ErrorKind::Runtime, "not enough memory: you tried to allocate");
}

TEST(HostileSizes, LinearOverAnEmptyInputWithHugeRows) {
  const Tensor x = broadcast_one({int64_t{1} << 40, int64_t{1} << 40, 0});
  expect_error([&] { linear(x, zeros({3, 0})); }, ErrorKind::Runtime, "linear: numel: integer multiplication overflow");
}

TEST(HostileSizes, AsStridedBoundsCheckCannotWrap) {
  const Tensor base = arange(Scalar(int64_t{0}), Scalar(int64_t{8})).to(DType::Float32);
  // (5 - 1) * 2^62 wraps to 0: once in bounds.
  expect_error([&] { base.as_strided({5}, {int64_t{1} << 62}); }, ErrorKind::Runtime,
               "reach elements past what int64 can address");
  expect_error([&] { base.as_strided({5}, {-(int64_t{1} << 62)}, 4); }, ErrorKind::Runtime,
               "reach elements past what int64 can address");
  // The largest stride, then +2 wrapping the upper end negative: once in bounds.
  expect_error([&] { base.as_strided({2, 2}, {kMax, 2}); }, ErrorKind::Runtime, "as_strided");
  expect_error([&] { base.as_strided({k2_32, k2_32}, {0, 0}); }, ErrorKind::Runtime,
               "as_strided: numel: integer multiplication overflow");
  // In int64 but past the storage: the ordinary bounds error.
  expect_error([&] { base.as_strided({3}, {4}); }, ErrorKind::Runtime, "require elements [0, 8]");
  // Empty views read nothing but must still be addressable in int64 bytes.
  expect_error([&] { base.as_strided({0, 2}, {1, kMax}); }, ErrorKind::Runtime,
               "reach elements past what int64 can address");
  expect_error([&] { base.as_strided({0}, {1}, kMax); }, ErrorKind::Runtime, "reach elements past");
  EXPECT_EQ(base.as_strided({0, 3}, {1, 1 << 20}).numel(), 0);
  // Valid geometry is unchanged, negative strides included.
  const Tensor v = base.as_strided({2, 2}, {1, 4}, 1);
  EXPECT_EQ(v.at({1, 1}).to_double(), 6.0);
  const Tensor back = base.as_strided({4}, {-2}, 7);
  EXPECT_EQ(back.at({3}).to_double(), 1.0);
  // A size-1 dim may carry any stride: it is never stepped along.
  EXPECT_EQ(base.as_strided({1, 2}, {kMax, 1}).at({0, 1}).to_double(), 1.0);

  auto storage = Storage::allocate(16);
  expect_error([&] { Tensor::from_storage(storage, {5}, {int64_t{1} << 62}, 0, DType::Float32); },
               ErrorKind::Runtime, "as_strided");
}

TEST(HostileSizes, NarrowAndSliceCannotWrap) {
  const Tensor t = arange(Scalar(int64_t{0}), Scalar(int64_t{4}));
  // start + length wrapped negative and passed: a view of 2^63 - 1 elements over 4.
  expect_error([&] { t.narrow(0, 1, kMax); }, ErrorKind::Runtime, "exceeds dimension size");
  // A step near INT64_MAX: one element, not a negative size.
  const Tensor s = t.slice(0, 1, std::nullopt, kMax);
  ASSERT_EQ(s.sizes(), Shape({1}));
  EXPECT_EQ(s.at({0}).to_int64(), 1);
  const Tensor s2 = t.slice(0, std::nullopt, std::nullopt, int64_t{1} << 62);
  ASSERT_EQ(s2.sizes(), Shape({1}));
  EXPECT_EQ(s2.at({0}).to_int64(), 0);
  EXPECT_EQ(t.slice(0, 0, std::nullopt, 3).sizes(), Shape({2}));
  EXPECT_EQ(t.slice(0, 0, std::nullopt, 3).at({1}).to_int64(), 3);
}

TEST(HostileSizes, ViewsOfEmptyTensorsCannotClaimHugeSizes) {
  // [2^32, 2^32] multiplies to 0 in wrapped arithmetic: it used to view an empty tensor.
  const Tensor e = Tensor::empty({0});
  expect_error([&] { e.view({k2_32, k2_32}); }, ErrorKind::Runtime, "shape '[4294967296, 4294967296]' is invalid");
  expect_error([&] { e.reshape({k2_32, k2_32}); }, ErrorKind::Runtime, "is invalid for input of size 0");
  expect_error([&] { e.view({-1, k2_32, k2_32}); }, ErrorKind::Runtime, "is invalid for input of size 0");
  EXPECT_EQ(e.view({k2_32, k2_32, 0}).numel(), 0);
  const Tensor wide = broadcast_one({0, int64_t{1} << 40, int64_t{1} << 40});
  expect_error([&] { wide.flatten(1, 2); }, ErrorKind::Runtime, "flatten: numel: integer multiplication overflow");
  expect_error([&] { Tensor::empty({4}).unflatten(0, {k2_32, k2_32}); }, ErrorKind::Runtime, "is invalid");
}

TEST(HostileSizes, ReductionsOverBroadcastViewsUseFullCounts) {
  // The count a mean divides by is the product of the reduced sizes. (Counts past int32
  // would take seconds to reduce; the arithmetic is the same 64-bit checked product.)
  const Tensor x = ones({1, 1}, DType::Float64).expand({1024, 1025});
  EXPECT_EQ(sum(x).item().to_double(), 1024.0 * 1025.0);
  EXPECT_EQ(mean(x).item().to_double(), 1.0);
  EXPECT_EQ(mean(x, {0}).at({7}).to_double(), 1.0);
  // Empty outputs whose reduced dims multiply past int64: nothing to compute.
  const Tensor wide = broadcast_one({0, int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_EQ(sum(wide, {1, 2}).sizes(), Shape({0}));
  EXPECT_EQ(mean(wide, {1, 2}).sizes(), Shape({0}));
  EXPECT_EQ(sum(wide).item().to_double(), 0.0);
}

TEST(HostileSizes, SplitsOfHugeDimsRaiseInsteadOfBadAlloc) {
  // 2^46 views would need 2^50 bytes for the list alone.
  const int64_t n = int64_t{1} << 46;
  const Tensor b = broadcast_one({n});
  expect_error([&] { split(b, 1); }, ErrorKind::Runtime, "split: not enough memory for a list of 70368744177664");
  expect_error([&] { chunk(b, n); }, ErrorKind::Runtime, "not enough memory for a list");
  expect_error([&] { tensor_split(b, n); }, ErrorKind::Runtime, "tensor_split: not enough memory");
  expect_error([&] { unbind(b); }, ErrorKind::Runtime, "unbind: not enough memory");
  expect_error([] { chunk(Tensor::empty({0}), int64_t{1} << 62); }, ErrorKind::Runtime, "chunk: not enough memory");
  // Counts near INT64_MAX: exact piece counts, not wrapped ones.
  const Tensor t = arange(Scalar(int64_t{0}), Scalar(int64_t{5}));
  EXPECT_EQ(split(t, kMax).size(), 1u);
  EXPECT_EQ(chunk(t, kMax).size(), 5u);
  // Sizes whose sum wraps to the dim's size.
  expect_error([&] { split_with_sizes(t, {kMax, kMax, 7}, 0); }, ErrorKind::Value, "to sum exactly to 5");
}

TEST(HostileSizes, CatLengthBeyondInt64Raises) {
  const Tensor half = broadcast_one({int64_t{1} << 62});
  expect_error([&] { cat({half, half}, 0); }, ErrorKind::Runtime, "cat: the concatenated size along dimension 0");
}

TEST(HostileSizes, EmptyTensorsAreContiguousWhateverTheirStrides) {
  // PyTorch's rule; materialising this one would need strides past int64.
  const Tensor wide = broadcast_one({0, int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_TRUE(wide.is_contiguous());
  EXPECT_TRUE(wide.contiguous().is_same(wide));
  EXPECT_TRUE(Tensor::empty({0, 3}).t().is_contiguous());
  EXPECT_FALSE(Tensor::empty({2, 3}).t().is_contiguous());
}

}  // namespace
}  // namespace kiln
