// Hostile input on views and copies (issue: hostile input never crashes): asking a
// 0-dim tensor for a dim, copies whose result would depend on the write order, and
// random integers a dtype cannot hold.
#include <gtest/gtest.h>

#include "kiln/ops/creation.h"
#include "kiln/tensor.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

TEST(HostileViews, ZeroDimTensorHasNoDimToAskFor) {
  const Tensor s = scalar_tensor(Scalar(1.5));
  expect_error([&] { (void)s.size(0); }, ErrorKind::Index, "dimension specified as 0 but tensor has no dimensions");
  expect_error([&] { (void)s.size(-1); }, ErrorKind::Index, "dimension specified as -1");
  expect_error([&] { (void)s.stride(-1); }, ErrorKind::Index, "tensor has no dimensions");
  expect_error([&] { (void)s.unflatten(0, {2, -1}); }, ErrorKind::Index, "tensor has no dimensions");
}

TEST(HostileViews, CopyRefusesOverlapThatDependsOnWriteOrder) {
  Tensor x = arange(Scalar(int64_t{6}), DType::Float32);
  // Partly overlapping source and destination (PyTorch refuses them too).
  expect_error([&] { x.narrow(0, 1, 5).copy_(x.narrow(0, 0, 5)); }, ErrorKind::Runtime,
               "some elements of the input tensor and the written-to tensor refer to a single memory location");
  // A destination whose elements share memory.
  Tensor row = zeros({1, 3});
  expect_error([&] { row.expand({4, 3}).copy_(ones({4, 3})); }, ErrorKind::Runtime,
               "more than one element of the written-to tensor refers to a single memory location");
  // The very same view is a no-op, as in PyTorch; disjoint views of one storage copy.
  x.copy_(x);
  x.narrow(0, 0, 3).copy_(x.narrow(0, 3, 3));
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(x.at({i}).to_double(), static_cast<double>(i + 3));
}

TEST(HostileViews, RandintRefusesBoundsTheDtypeCannotHold) {
  expect_error([] { randint(-5, 5, {5}, DType::UInt8); }, ErrorKind::Runtime, "from is out of bounds for uint8");
  expect_error([] { randint(0, int64_t{1} << 40, {5}, DType::Int16); }, ErrorKind::Runtime,
               "to - 1 is out of bounds for int16");
  expect_error([] { randint(0, (int64_t{1} << 24) + 2, {5}, DType::Float32); }, ErrorKind::Runtime,
               "to - 1 is out of bounds for float32");
  const Tensor ok = randint(-128, 128, {64}, DType::Int8);
  for (int64_t i = 0; i < 64; ++i) {
    const int64_t v = ok.at({i}).to_int64();
    EXPECT_GE(v, -128);
    EXPECT_LT(v, 128);
  }
}

}  // namespace
}  // namespace kiln
