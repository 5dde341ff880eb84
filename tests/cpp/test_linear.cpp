// linear (F.linear) against a float64 reference: one-row (GEMV kernel) and many-row
// (OpenBLAS) inputs over sizes around the SIMD step and 128 boundaries, every dtype,
// bias forms, leading dims, non-contiguous inputs and weights, each Highway target,
// special values, and every error path. Tolerances: linear_test_util.h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ops/linear.h"
#include "linear_test_util.h"

using namespace kiln;
using namespace linear_test;

namespace {

// Sizes around every target's step (AVX3 32 or 64 weights, AVX2 16, scalar 2), the
// 8-row pass and its 4-row tail, and the 128 block.
const std::vector<int64_t> kSizes = {1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200};

std::string describe(DType dt, int64_t M, int64_t N, int64_t K, bool bias) {
  return std::string(dtype_name(dt)) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
         " K=" + std::to_string(K) + (bias ? " +bias" : "");
}

// linear(x [M, K], w [N, K], bias [N]?) against the reference.
void check_linear(DType dt, int64_t M, int64_t N, int64_t K, bool with_bias, uint64_t seed) {
  const Tensor x = random_tensor({M, K}, dt, seed);
  const Tensor w = random_tensor({N, K}, dt, seed + 1);
  std::optional<Tensor> b;
  if (with_bias) b = random_tensor({N}, dt, seed + 2);
  const Tensor y = linear(x, w, b);
  ASSERT_EQ(y.sizes(), (Shape{M, N}));
  ASSERT_EQ(y.dtype(), dt);
  const Reference ref = reference_linear(values(x), values(w), b ? values(*b) : std::vector<double>{}, M, N, K);
  expect_close(y, ref, K, describe(dt, M, N, K, with_bias));
}

const DType kDTypes[] = {DType::Float32, DType::BFloat16, DType::Float16, DType::Float64};

void sweep_one_row(const std::vector<DType>& dtypes) {
  uint64_t seed = 1;
  for (DType dt : dtypes) {
    for (int64_t K : kSizes) {
      for (int64_t N : {1, 3, 4, 5, 9, 33, 129}) {
        check_linear(dt, 1, N, K, (K + N) % 2 == 0, seed += 3);
      }
    }
  }
}

TEST(Linear, OneRowSweep) { sweep_one_row({std::begin(kDTypes), std::end(kDTypes)}); }

TEST(Linear, OneRowSweepOnEachTarget) {
  for_each_target([] { sweep_one_row({DType::Float32, DType::BFloat16, DType::Float16}); });
}

TEST(Linear, ManyRowsSweep) {
  uint64_t seed = 100;
  for (DType dt : kDTypes) {
    for (int64_t M : {2, 3, 17}) {
      for (int64_t K : {1, 15, 16, 17, 127, 128, 129}) {
        for (int64_t N : {1, 5, 16, 33}) check_linear(dt, M, N, K, (M + K + N) % 2 == 1, seed += 3);
      }
    }
  }
}

TEST(Linear, BiasOrNotOnBothPaths) {
  for (DType dt : kDTypes) {
    for (int64_t M : {1, 4}) {
      check_linear(dt, M, 37, 70, true, 7);
      check_linear(dt, M, 37, 70, false, 8);
    }
  }
}

// Enough rows to run on several threads, and K past several blocks.
TEST(Linear, Large) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) check_linear(dt, 1, 4096, 2048, true, 11);
  check_linear(DType::BFloat16, 1, 3001, 1000, false, 12);
  check_linear(DType::BFloat16, 64, 300, 2048, true, 13);
  check_linear(DType::Float32, 40, 513, 777, true, 14);
}

// Rows split over the pool in groups of 8, each chunk converting x itself (K not a whole
// step): 8-row passes, a 4-row tail and single rows in the last chunk; the larger K next
// makes a worker's x scratch grow.
TEST(Linear, SplitAcrossThreadsOnEachTarget) {
  for_each_target([] {
    uint64_t seed = 300;
    for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
      check_linear(dt, 1, 77, 1031, true, seed += 3);
      check_linear(dt, 1, 29, 3001, false, seed += 3);
    }
  });
}

TEST(Linear, LeadingDims) {
  const int64_t K = 19, N = 6;
  const Tensor w = random_tensor({N, K}, DType::BFloat16, 21);
  const Tensor b = random_tensor({N}, DType::BFloat16, 22);
  const std::vector<double> wv = values(w), bv = values(b);
  for (const Shape& lead : std::vector<Shape>{{}, {1}, {1, 1}, {3}, {2, 3}, {1, 4, 1}}) {
    Shape xs = lead;
    xs.push_back(K);
    const Tensor x = random_tensor(xs, DType::BFloat16, 23);
    const Tensor y = linear(x, w, b);
    Shape want = lead;
    want.push_back(N);
    ASSERT_EQ(y.sizes(), want);
    const int64_t M = shape_numel(lead);
    expect_close(y, reference_linear(values(x), wv, bv, M, N, K), K, "leading " + shape_to_string(lead));
  }
}

TEST(Linear, EmptyExtents) {
  for (DType dt : kDTypes) {
    const Tensor b = random_tensor({5}, dt, 31);
    // K = 0: an empty sum, so the bias (broadcast over the rows) or zeros.
    const Tensor y = linear(empty({3, 0}, dt), empty({5, 0}, dt), b);
    ASSERT_EQ(y.sizes(), (Shape{3, 5}));
    const std::vector<double> yv = values(y), bv = values(b);
    for (size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(yv[i], bv[i % 5]);
    for (double v : values(linear(empty({0}, dt), empty({4, 0}, dt)))) EXPECT_EQ(v, 0.0);
    EXPECT_EQ(linear(empty({0}, dt), empty({4, 0}, dt)).sizes(), (Shape{4}));
    // M = 0 and N = 0.
    EXPECT_EQ(linear(empty({2, 0, 7}, dt), random_tensor({5, 7}, dt, 32)).sizes(), (Shape{2, 0, 5}));
    EXPECT_EQ(linear(random_tensor({3, 7}, dt, 33), empty({0, 7}, dt), empty({0}, dt)).sizes(), (Shape{3, 0}));
    EXPECT_EQ(linear(random_tensor({7}, dt, 34), empty({0, 7}, dt)).sizes(), (Shape{0}));
  }
}

TEST(Linear, BroadcastBias) {
  const Tensor x = random_tensor({2, 9}, DType::Float32, 41);
  const Tensor w = random_tensor({4, 9}, DType::Float32, 42);
  for (const Tensor& b : {full({1}, Scalar(0.5), DType::Float32), scalar_tensor(Scalar(-2.0), DType::Float32)}) {
    const Reference ref = reference_linear(values(x), values(w), values(b), 2, 4, 9);
    expect_close(linear(x, w, b), ref, 9, "bias " + b.shape_str());
    const Reference one = reference_linear(values(x.select(0, 1)), values(w), values(b), 1, 4, 9);
    expect_close(linear(x.select(0, 1), w, b), one, 9, "one row, bias " + b.shape_str());
  }
}

// Weights with a row stride (a column slice of a wider matrix, read in place), with no
// unit inner stride (transposed, copied), and with overlapping rows (stride 0).
TEST(Linear, NonContiguousOperands) {
  for (DType dt : kDTypes) {
    for (int64_t M : {1, 5}) {
      const int64_t N = 37, K = 45;
      const Tensor wide = random_tensor({N, K + 13}, dt, 51);
      const Tensor sliced_w = wide.narrow(1, 3, K);
      const Tensor transposed_w = random_tensor({K, N}, dt, 52).t();
      const Tensor broadcast_w = random_tensor({1, K}, dt, 53).expand({N, K});
      const Tensor stepped_x = random_tensor({M, 2 * K}, dt, 54).slice(1, 0, std::nullopt, 2);
      const Tensor transposed_x = random_tensor({K, M}, dt, 55).t();
      const Tensor b = random_tensor({2 * N}, dt, 56).slice(0, 0, std::nullopt, 2);
      for (const Tensor& w : {sliced_w, transposed_w, broadcast_w}) {
        for (const Tensor& x : {stepped_x, transposed_x}) {
          const Reference ref = reference_linear(values(x), values(w), values(b), M, N, K);
          expect_close(linear(x, w, b), ref, K,
                       describe(dt, M, N, K, true) + " w strides " + shape_to_string(w.strides()) + " x strides " +
                           shape_to_string(x.strides()));
        }
      }
    }
  }
}

// IEEE specials flow through the products like in any f32 sum: inf * finite = inf,
// inf - inf = NaN, NaN stays NaN; float16 subnormal weights are exact.
TEST(Linear, SpecialValues) {
  for_each_target([] {
    for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
      const int64_t K = 40;
      Tensor w = zeros({3, K}, dt);
      Tensor x = ones({K}, dt);
      w.select(0, 0).select(0, 7).fill_(Scalar(std::numeric_limits<double>::infinity()));
      w.select(0, 1).select(0, 3).fill_(Scalar(std::numeric_limits<double>::infinity()));
      w.select(0, 1).select(0, 39).fill_(Scalar(-std::numeric_limits<double>::infinity()));
      w.select(0, 2).select(0, 38).fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
      const std::vector<double> y = values(linear(x, w));
      EXPECT_EQ(y[0], std::numeric_limits<double>::infinity()) << dtype_name(dt);
      EXPECT_TRUE(std::isnan(y[1])) << dtype_name(dt);
      EXPECT_TRUE(std::isnan(y[2])) << dtype_name(dt);
    }
    // Every positive f16 subnormal times 2^10: exact in the f32 sum and in f16.
    Tensor w = empty({1, 1023}, DType::Float16);
    for (int i = 0; i < 1023; ++i) w.data<uint16_t>()[i] = static_cast<uint16_t>(i + 1);
    const Tensor y = linear(full({1023}, Scalar(1024.0), DType::Float32), w.to(DType::Float32));
    const Tensor yh = linear(full({1023}, Scalar(1.0), DType::Float16), w);
    const double want = 1023.0 * 1024.0 / 2.0 * 0x1p-24;  // sum of i * 2^-24
    EXPECT_EQ(values(y)[0], want * 1024.0);
    EXPECT_EQ(values(yh)[0], static_cast<double>(Half(static_cast<float>(want))));
  });
}

TEST(Linear, Errors) {
  const Tensor x = random_tensor({2, 3}, DType::Float32, 61);
  const Tensor w = random_tensor({5, 4}, DType::Float32, 62);
  expect_error([&] { linear(x, w); }, ErrorKind::Runtime, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  expect_error([&] { linear(random_tensor({3}, DType::Float32, 63), w); }, ErrorKind::Runtime,
               "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)");
  expect_error([&] { linear(random_tensor({2, 2, 3}, DType::Float32, 64), w); }, ErrorKind::Runtime,
               "(4x3 and 4x5)");
  expect_error([&] { linear(x, w.to(DType::BFloat16)); }, ErrorKind::Type,
               "mat1 and mat2 must have the same dtype, but got float32 and bfloat16");
  expect_error([&] { linear(scalar_tensor(Scalar(1.0)), w); }, ErrorKind::Runtime,
               "both arguments to linear need to be at least 1D, but they are 0D and 2D");
  expect_error([&] { linear(x, random_tensor({3}, DType::Float32, 65)); }, ErrorKind::Runtime,
               "weight must be a 2-D [out_features, in_features] matrix, got a 1-D tensor of shape [3]");
  expect_error([&] { linear(x, random_tensor({2, 5, 3}, DType::Float32, 66)); }, ErrorKind::Runtime,
               "got a 3-D tensor");
  const Tensor w3 = random_tensor({5, 3}, DType::Float32, 67);
  expect_error([&] { linear(x, w3, random_tensor({4}, DType::Float32, 68)); }, ErrorKind::Runtime,
               "bias must have shape [5] (out_features), or [1] or [] to broadcast, but got [4]");
  expect_error([&] { linear(x, w3, random_tensor({1, 5}, DType::Float32, 69)); }, ErrorKind::Runtime,
               "but got [1, 5]");
  expect_error([&] { linear(x, w3, random_tensor({5}, DType::Float64, 70)); }, ErrorKind::Type,
               "bias must have the dtype of the input (float32), but got float64");
  expect_error([&] { linear(x.to(DType::Int64), w3.to(DType::Int64)); }, ErrorKind::Type,
               "expected float32, float64, bfloat16 or float16 tensors, got int64");
  expect_error([&] { linear(x.to(DType::Complex64), w3.to(DType::Complex64)); }, ErrorKind::Type,
               "got complex64");
  expect_error([&] { linear(x, w3.to(DType::Float8_e4m3fn)); }, ErrorKind::Type, "use linear_fp8");
  expect_error([&] { linear(Tensor(), w3); }, ErrorKind::Runtime, "undefined tensor");
  expect_error([&] { linear(x, w3, Tensor()); }, ErrorKind::Runtime, "'bias' is an undefined tensor");
}

}  // namespace
