// silu_and_mul against a plain double reference: sizes around the SIMD widths, long
// threaded inputs, every float dtype, non-contiguous and broadcast inputs, extreme
// gates, and the error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/elementwise/activation_fused_kernels.h"
#include "kiln/ops/nn.h"
#include "nn_test_utils.h"

namespace kiln {
namespace {

using nn_test::compute_roundoff;
using nn_test::expect_error;
using nn_test::for_each_target;
using nn_test::from_doubles;
using nn_test::near;
using nn_test::random_sample;
using nn_test::round_to;
using nn_test::to_doubles;
using nn_test::underflow_error;
using nn_test::unit_roundoff;


// y = silu(g) * up, g = x[..., :I], up = x[..., I:]. Tolerance: e^-g within 2 ulp (4u)
// plus the rounding of -g's argument (none: negation is exact), 1 + e^-g (u), the
// division (u) and the product (u): 7u relative in the compute dtype, then one rounding
// to the output dtype (or half a subnormal where float16 underflows).
void check_silu_and_mul(const Tensor& x, const std::vector<double>& values) {
  const Tensor got = silu_and_mul(x);
  const int64_t two_i = x.size(-1), half = two_i / 2, rows = two_i == 0 ? 0 : x.numel() / two_i;
  Shape want_shape = x.sizes();
  want_shape.back() = half;
  ASSERT_EQ(got.sizes(), want_shape);
  ASSERT_EQ(got.dtype(), x.dtype());
  const std::vector<double> y = to_doubles(got);
  const double u = compute_roundoff(x.dtype());
  int failures = 0;
  for (int64_t r = 0; r < rows && failures < 5; ++r) {
    for (int64_t j = 0; j < half && failures < 5; ++j) {
      const double g = values[r * two_i + j], up = values[r * two_i + half + j];
      const double want = g / (1.0 + std::exp(-g)) * up;
      const double tol = std::fabs(want) * (7 * u + 2 * unit_roundoff(x.dtype())) + underflow_error(x.dtype()) + 1e-300;
      const auto ok = near(y[r * half + j], round_to(want, x.dtype()), tol);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "row " << r << " col " << j << " of " << half << ": " << ok.message();
      }
    }
  }
}

TEST(SiluAndMul, EveryTargetAndSize) {
  for_each_target(cpu::activation_fused_simd_targets(), [] {
    for (int64_t half : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 768, 1000}) {
      SCOPED_TRACE("I = " + std::to_string(half));
      for (DType dt : {DType::Float32, DType::Float64}) {
        const auto s = random_sample({3, 2 * half}, dt, static_cast<uint32_t>(half), -12, 12);
        check_silu_and_mul(s.tensor, s.values);
      }
    }
  });
}

TEST(SiluAndMul, NarrowDtypesAndThreads) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    const auto s = random_sample({5, 2 * 777}, dt, 3, -8, 8);
    check_silu_and_mul(s.tensor, s.values);
  }
  // [128, 2 * 768]: an MoE expert batch, spread over the pool.
  const auto s = random_sample({128, 1536}, DType::Float32, 4, -6, 6);
  check_silu_and_mul(s.tensor, s.values);
}

TEST(SiluAndMul, ExtremeGates) {
  const double inf = std::numeric_limits<double>::infinity();
  // Very negative gates give -0 * up (e^-g overflows), large ones give g * up; -inf
  // gives NaN (-inf / inf, as PyTorch's x / (1 + e^-x)); a NaN propagates.
  const std::vector<double> v = {-1000, -100, -88.5, -20, 0, 20, 88.5, 100, 1000, -inf, inf, std::nan(""),
                                 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  const Tensor x = from_doubles(v, {1, 24}, DType::Float32);
  const std::vector<double> y = to_doubles(silu_and_mul(x));
  const std::vector<double> want = {-0.0 * 2, -100 * std::exp(-100.0) * 3, -88.5 * std::exp(-88.5) * 4,
                                    -20 / (1 + std::exp(20.0)) * 5, 0, 20 / (1 + std::exp(-20.0)) * 7, 88.5 * 8,
                                    100 * 9, 1000 * 10, std::nan(""), inf, std::nan("")};
  for (size_t j = 0; j < want.size(); ++j) {
    EXPECT_TRUE(near(y[j], want[j], std::fabs(want[j]) * 1e-6 + 1e-37)) << j;
  }
}

TEST(SiluAndMul, StridedBroadcastAndEmpty) {
  const auto s = random_sample({8, 6}, DType::Float32, 5);
  const Tensor xt = s.tensor.t();  // [6, 8], last dim strided
  check_silu_and_mul(xt, to_doubles(xt));
  const Tensor row = from_doubles(nn_test::uniform(10, 6, -3, 3), {1, 10}, DType::Float32);
  const Tensor expanded = row.expand({4, 10});
  check_silu_and_mul(expanded, to_doubles(expanded));
  EXPECT_EQ(silu_and_mul(Tensor::empty({0, 8})).sizes(), (Shape{0, 4}));
  EXPECT_EQ(silu_and_mul(Tensor::empty({3, 0})).sizes(), (Shape{3, 0}));
}

TEST(SiluAndMul, Errors) {
  expect_error([] { silu_and_mul(Tensor::empty({2, 5})); }, ErrorKind::Runtime,
               {"silu_and_mul:", "even size", "[2, 5]"});
  expect_error([] { silu_and_mul(Tensor::empty({}, DType::Float32)); }, ErrorKind::Runtime, {"silu_and_mul"});
  expect_error([] { silu_and_mul(Tensor::empty({2, 4}, DType::Int32)); }, ErrorKind::Type, {"int32"});
  expect_error([] { silu_and_mul(Tensor()); }, ErrorKind::Runtime, {"undefined"});
}

}  // namespace
}  // namespace kiln
