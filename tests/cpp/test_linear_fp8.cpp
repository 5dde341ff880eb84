// linear_fp8, quantize_fp8_rowwise and dequantize_fp8 against float64 references
// (dequantise, then multiply in double): every e4m3 code exact on every Highway target,
// both scale layouts around the 128-block boundaries, one and many rows, each
// activation dtype, bias, non-contiguous operands, and every error path. Many rows run
// the bf16 dot path where the CPU has it (x rounded to bf16, which the reference then
// does too: activations_as_used); test_bf16_dot_fp8.cpp runs both paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/moe/moe_kernels.h"
#include "bf16_dot_mode.h"
#include "kiln/cpu_features.h"
#include "kiln/ops/linear.h"
#include "linear_test_util.h"

using namespace kiln;
using namespace linear_test;

namespace {

int64_t ceil128(int64_t v) { return (v + 127) / 128; }

// w_real[n, k] = e4m3(q[n, k]) * scale, in double (exact), for either layout.
std::vector<double> dequantized_reference(const Tensor& q, const Tensor& scale) {
  const int64_t N = q.size(0), K = q.size(1);
  const std::vector<double> qv = values(q), sv = values(scale);
  std::vector<double> w(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const double s = scale.dim() == 1 ? sv[static_cast<size_t>(n)]
                                        : sv[static_cast<size_t>(n / 128 * ceil128(K) + k / 128)];
      w[static_cast<size_t>(n * K + k)] = qv[static_cast<size_t>(n * K + k)] * s;
    }
  }
  return w;
}

// Positive float32 scales spanning 2^-14 .. 2^-3 (weights up to ~100: float16 results
// stay finite), per row or per 128x128 block.
Tensor random_scale(int64_t N, int64_t K, bool blocked, uint64_t seed) {
  Tensor t = empty(blocked ? Shape{ceil128(N), ceil128(K)} : Shape{N}, DType::Float32);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::ldexp(1.0f + unit(rng), static_cast<int>(rng() % 11) - 14);
  return t;
}

std::string describe(DType dt, int64_t M, int64_t N, int64_t K, bool blocked, bool bias) {
  return std::string(dtype_name(dt)) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
         " K=" + std::to_string(K) + (blocked ? " block scales" : " row scales") + (bias ? " +bias" : "");
}

void check_fp8(DType dt, int64_t M, int64_t N, int64_t K, bool blocked, bool with_bias, uint64_t seed) {
  const Tensor x = random_tensor({M, K}, dt, seed);
  const Tensor q = random_fp8({N, K}, seed + 1);
  const Tensor scale = random_scale(N, K, blocked, seed + 2);
  std::optional<Tensor> b;
  if (with_bias) b = random_tensor({N}, dt, seed + 3);
  const Tensor y = linear_fp8(x, q, scale, b);
  ASSERT_EQ(y.sizes(), (Shape{M, N}));
  ASSERT_EQ(y.dtype(), dt);
  const Reference ref = reference_linear(activations_as_used(x, M, q.dtype()), dequantized_reference(q, scale),
                                         b ? values(*b) : std::vector<double>{}, M, N, K);
  expect_close(y, ref, K, describe(dt, M, N, K, blocked, with_bias));
}

const std::vector<int64_t> kSizes = {1, 3, 4, 5, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257};

void sweep(const std::vector<DType>& dtypes, const std::vector<int64_t>& rows) {
  uint64_t seed = 1;
  for (DType dt : dtypes) {
    for (int64_t M : rows) {
      for (int64_t K : kSizes) {
        for (int64_t N : {1, 4, 5, 127, 129}) {
          check_fp8(dt, M, N, K, (K + N) % 2 == 0, (K + N + M) % 3 == 0, seed += 4);
        }
      }
    }
  }
}

const std::vector<DType> kActivationDTypes = {DType::Float32, DType::BFloat16, DType::Float16};

TEST(LinearFp8, OneRowSweep) { sweep(kActivationDTypes, {1}); }

TEST(LinearFp8, OneRowSweepOnEachTarget) {
  for_each_target([] { sweep({DType::Float32, DType::BFloat16}, {1}); });
}

// The one-row FP8 kernels with the bf16 dot switch forced each way, on every target: the
// float32 path multiplies x as given, the bf16 dot path (AVX3_DL with AVX512-BF16) x
// rounded to bf16, each checked against the float64 reference of what it multiplies.
TEST(LinearFp8, OneRowBothBf16DotModesOnEachTarget) {
  for (int mode : {0, 1}) {
    SCOPED_TRACE(mode == 0 ? "KILN_BF16_DOT=0" : "bf16 dot on");
    const bf16_dot_test::Bf16DotMode forced(mode);
    for_each_target([&] {
      EXPECT_EQ(cpu::fp8_kernels_round_x_to_bf16(),
                mode == 1 && cpu_has_bf16_dot() && cpu::fp8_kernels_target() == HWY_AVX3_DL);
      uint64_t seed = 700;
      for (DType dt : kActivationDTypes) {
        for (int64_t K : {1, 63, 64, 65, 127, 128, 129, 300}) {
          for (int64_t N : {1, 7, 8, 9, 130}) check_fp8(dt, 1, N, K, (K + N) % 2 == 0, K % 3 == 0, seed += 4);
        }
      }
    });
  }
}

// The FP8 files ask Highway for AVX3_DL (HWY_WANT_AVX3_DL; Highway 1.0.3 leaves that
// target out otherwise), and their dispatch picks the best target both this CPU and
// they have: AVX3_DL on CPUs with AVX-512 VBMI.
TEST(LinearFp8, KernelsDispatchToTheBestCompiledTarget) {
  const int64_t usable = cpu::gemv_simd_targets() & hwy::SupportedTargets();
  ASSERT_NE(usable, 0);
  EXPECT_EQ(cpu::fp8_kernels_target(), usable & -usable);
#if HWY_ARCH_X86 && !defined(HWY_COMPILE_ONLY_STATIC)
  EXPECT_NE(cpu::gemv_simd_targets() & HWY_AVX3_DL, 0);
  EXPECT_NE(cpu::moe_simd_targets() & HWY_AVX3_DL, 0);
  if ((hwy::SupportedTargets() & HWY_AVX3_DL) != 0) EXPECT_EQ(cpu::fp8_kernels_target(), HWY_AVX3_DL);
#endif
}

TEST(LinearFp8, ManyRowsSweep) { sweep(kActivationDTypes, {2, 7}); }

TEST(LinearFp8, ManyRowsOnEachTarget) {
  for_each_target([] { sweep({DType::BFloat16}, {3}); });
}

TEST(LinearFp8, BothLayoutsBothPaths) {
  for (bool blocked : {false, true}) {
    for (int64_t M : {1, 6}) {
      for (bool bias : {false, true}) check_fp8(DType::BFloat16, M, 300, 520, blocked, bias, 17);
    }
  }
}

// Several threads and many 128-blocks.
TEST(LinearFp8, Large) {
  check_fp8(DType::BFloat16, 1, 4096, 2048, true, false, 21);
  check_fp8(DType::Float32, 1, 4096, 2048, false, true, 22);
  check_fp8(DType::BFloat16, 33, 700, 1100, true, true, 23);
}

// Rows split over the pool in groups of 8 (each chunk converts x itself, K not a whole
// step) across 128-row scale blocks, with 4-row and single-row tails, on every target.
TEST(LinearFp8, SplitAcrossThreadsOnEachTarget) {
  for_each_target([] {
    check_fp8(DType::BFloat16, 1, 300, 520, true, true, 31);
    check_fp8(DType::Float32, 1, 201, 1500, false, false, 32);
    check_fp8(DType::Float16, 1, 201, 1500, true, false, 33);
  });
}

// x = e_k (one-hot) reads back one weight per output row: every code, normal and
// subnormal, must come out as exactly e4m3(code) * scale, rounded once to f32, on every
// target and on both paths. The NaN codes read as ±480 (documented in linear.h).
TEST(LinearFp8, EveryCodeExact) {
  for_each_target([] {
    const int64_t K = 256;
    Tensor q = empty({256, K}, DType::Float8_e4m3fn);
    for (int64_t n = 0; n < 256; ++n) {
      for (int64_t k = 0; k < K; ++k) q.data<uint8_t>()[n * K + k] = static_cast<uint8_t>((n + k) % 256);
    }
    const float s = 0.3f;
    const Tensor scale = full({256}, Scalar(static_cast<double>(s)), DType::Float32);
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{37}, int64_t{200}}) {
      for (int64_t M : {1, 2}) {
        Tensor x = zeros({M, K}, DType::Float32);
        for (int64_t m = 0; m < M; ++m) x.data<float>()[m * K + k] = 1.0f;
        const std::vector<double> y = values(linear_fp8(x, q, scale));
        for (int64_t n = 0; n < 256; ++n) {
          const uint8_t code = static_cast<uint8_t>((n + k) % 256);
          const float real = (code & 0x7F) == 0x7F ? ((code & 0x80) ? -480.0f : 480.0f)
                                                    : static_cast<float>(Float8_e4m3fn::from_bits(code));
          ASSERT_EQ(y[static_cast<size_t>(n)], static_cast<double>(real * s))
              << "code 0x" << std::hex << int{code} << std::dec << " k " << k << " M " << M;
        }
      }
    }
  });
}

TEST(LinearFp8, NonContiguousOperands) {
  const int64_t N = 130, K = 140;
  const Tensor wide = random_fp8({N, K + 9}, 31);
  const Tensor sliced_w = wide.narrow(1, 5, K);
  const Tensor transposed_w = random_fp8({K, N}, 32).t();
  const Tensor x = random_tensor({3, 2 * K}, DType::BFloat16, 33).slice(1, 1, std::nullopt, 2);
  for (bool blocked : {false, true}) {
    const Tensor scale = blocked ? random_scale(N, K, true, 35).t().contiguous().t() : random_scale(N, K, false, 34);
    for (const Tensor& w : {sliced_w, transposed_w}) {
      for (int64_t M : {1, 3}) {
        const Tensor xm = x.narrow(0, 0, M);
        const Reference ref =
            reference_linear(activations_as_used(xm, M, w.dtype()), dequantized_reference(w, scale), {}, M, N, K);
        expect_close(linear_fp8(xm, w, scale), ref, K,
                     describe(DType::BFloat16, M, N, K, blocked, false) + " w strides " + shape_to_string(w.strides()));
      }
    }
  }
}

TEST(LinearFp8, LeadingDimsAndEmpty) {
  const Tensor q = random_fp8({6, 20}, 41);
  const Tensor scale = random_scale(6, 20, false, 42);
  EXPECT_EQ(linear_fp8(random_tensor({20}, DType::BFloat16, 43), q, scale).sizes(), (Shape{6}));
  EXPECT_EQ(linear_fp8(random_tensor({2, 1, 20}, DType::BFloat16, 44), q, scale).sizes(), (Shape{2, 1, 6}));
  EXPECT_EQ(linear_fp8(empty({0, 20}, DType::Float32), q, scale).sizes(), (Shape{0, 6}));
  const Tensor bias = random_tensor({6}, DType::Float32, 45);
  const Tensor y = linear_fp8(empty({2, 0}, DType::Float32), empty({6, 0}, DType::Float8_e4m3fn),
                              empty({6}, DType::Float32), bias);
  const std::vector<double> yv = values(y), bv = values(bias);
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(yv[i], bv[i % 6]);
}

TEST(LinearFp8, QuantizeRowwise) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    const int64_t N = 9, K = 300;
    Tensor w = random_tensor({N, K + 4}, dt, 51).narrow(1, 2, K);  // row stride K + 4
    w.select(0, 3).zero_();
    const auto [q, scale] = quantize_fp8_rowwise(w);
    ASSERT_EQ(q.dtype(), DType::Float8_e4m3fn);
    ASSERT_EQ(q.sizes(), (Shape{N, K}));
    ASSERT_EQ(scale.dtype(), DType::Float32);
    ASSERT_EQ(scale.sizes(), (Shape{N}));
    const std::vector<double> wv = values(w), sv = values(scale), qv = values(q);
    for (int64_t n = 0; n < N; ++n) {
      float amax = 0;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(static_cast<float>(wv[static_cast<size_t>(n * K + k)])));
      const float want_scale = n == 3 ? 1.0f : amax / 448.0f;
      ASSERT_EQ(sv[static_cast<size_t>(n)], static_cast<double>(want_scale)) << "row " << n;
      for (int64_t k = 0; k < K; ++k) {
        const float v = static_cast<float>(wv[static_cast<size_t>(n * K + k)]) / want_scale;
        ASSERT_EQ(qv[static_cast<size_t>(n * K + k)], static_cast<double>(static_cast<float>(Float8_e4m3fn(v))))
            << "row " << n << " col " << k;
      }
    }
    // The row maximum maps to ±448 (saturating any rounding of amax / (amax / 448)).
    const std::vector<double> back = values(dequantize_fp8(q, scale));
    for (size_t i = 0; i < back.size(); ++i) {
      // e4m3 keeps 3 mantissa bits: a relative error of at most 2^-4, or an absolute
      // 2^-10 * scale in the subnormal range.
      const double s = sv[i / static_cast<size_t>(K)];
      EXPECT_LE(std::fabs(back[i] - wv[i]), std::fabs(wv[i]) * (0x1p-4 + 0x1p-20) + s * 0x1p-10) << i;
    }
  }
  Tensor bad = random_tensor({3, 5}, DType::Float32, 52);
  bad.select(0, 1).select(0, 2).fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
  expect_error([&] { quantize_fp8_rowwise(bad); }, ErrorKind::Value, "weight row 1 holds inf or NaN");
  bad.select(0, 1).select(0, 2).fill_(Scalar(-std::numeric_limits<double>::infinity()));
  expect_error([&] { quantize_fp8_rowwise(bad); }, ErrorKind::Value, "weight row 1 holds inf or NaN");
  const auto [q0, s0] = quantize_fp8_rowwise(empty({4, 0}, DType::Float32));
  EXPECT_EQ(q0.sizes(), (Shape{4, 0}));
  for (double v : values(s0)) EXPECT_EQ(v, 1.0);
  expect_error([] { quantize_fp8_rowwise(zeros({3}, DType::Float32)); }, ErrorKind::Runtime, "2-D");
  expect_error([] { quantize_fp8_rowwise(zeros({3, 2}, DType::Float64)); }, ErrorKind::Type,
               "weight must be float32, bfloat16 or float16, but got float64");
}

TEST(LinearFp8, Dequantize) {
  const int64_t N = 200, K = 131;
  const Tensor q = random_fp8({N, K}, 61);
  for (bool blocked : {false, true}) {
    const Tensor scale = random_scale(N, K, blocked, 62);
    const std::vector<double> want = dequantized_reference(q, scale);
    for (DType dt : {DType::Float32, DType::BFloat16}) {
      const Tensor d = dequantize_fp8(q, scale, dt);
      ASSERT_EQ(d.dtype(), dt);
      ASSERT_EQ(d.sizes(), (Shape{N, K}));
      const std::vector<double> got = values(d);
      // One f32 rounding of the product, then possibly one bf16 rounding.
      const double u = dt == DType::Float32 ? 0x1p-24 : 0x1p-8 + 0x1p-23;
      for (size_t i = 0; i < got.size(); ++i) ASSERT_LE(std::fabs(got[i] - want[i]), u * std::fabs(want[i])) << i;
    }
  }
  // The exact cast: NaN codes stay NaN here.
  Tensor nan_code = zeros({1, 2}, DType::Float8_e4m3fn);
  nan_code.data<uint8_t>()[1] = 0xFF;
  EXPECT_TRUE(std::isnan(values(dequantize_fp8(nan_code, ones({1}, DType::Float32)))[1]));
}

TEST(LinearFp8, Errors) {
  const Tensor x = random_tensor({2, 130}, DType::BFloat16, 71);
  const Tensor q = random_fp8({5, 130}, 72);
  const Tensor row_scale = ones({5}, DType::Float32);
  expect_error([&] { linear_fp8(x, q.to(DType::BFloat16), row_scale); }, ErrorKind::Type,
               "weight must be float8_e4m3fn, but got bfloat16");
  expect_error([&] { linear_fp8(x, q.to(DType::Float8_e5m2), row_scale); }, ErrorKind::Type,
               "but got float8_e5m2");
  expect_error([&] { linear_fp8(x.to(DType::Float64), q, row_scale); }, ErrorKind::Type,
               "input must be float32, bfloat16 or float16, but got float64");
  expect_error([&] { linear_fp8(x, q, row_scale.to(DType::BFloat16)); }, ErrorKind::Type,
               "scale must be float32, but got bfloat16");
  expect_error([&] { linear_fp8(x, q, ones({4}, DType::Float32)); }, ErrorKind::Runtime,
               "scale must be [5] (one per output row) or [1, 2] (one per 128x128 block) for a weight of shape "
               "[5, 130], but got [4]");
  expect_error([&] { linear_fp8(x, q, ones({1, 1}, DType::Float32)); }, ErrorKind::Runtime, "but got [1, 1]");
  expect_error([&] { linear_fp8(x, q, ones({5, 1}, DType::Float32)); }, ErrorKind::Runtime, "but got [5, 1]");
  expect_error([&] { linear_fp8(x, random_fp8({5, 129}, 73), ones({5}, DType::Float32)); }, ErrorKind::Runtime,
               "mat1 and mat2 shapes cannot be multiplied (2x130 and 129x5)");
  expect_error([&] { linear_fp8(x, random_fp8({130}, 74), ones({1}, DType::Float32)); }, ErrorKind::Runtime,
               "weight must be a 2-D");
  expect_error([&] { linear_fp8(x, q, row_scale, ones({5}, DType::Float32)); }, ErrorKind::Type,
               "bias must have the dtype of the input (bfloat16), but got float32");
  expect_error([&] { linear_fp8(x, q, row_scale, ones({6}, DType::BFloat16)); }, ErrorKind::Runtime,
               "bias must have shape [5]");
  expect_error([&] { linear_fp8(scalar_tensor(Scalar(1.0)), q, row_scale); }, ErrorKind::Runtime,
               "need to be at least 1D");
  expect_error([&] { dequantize_fp8(q, row_scale, DType::Float64); }, ErrorKind::Type,
               "dtype must be float32, bfloat16 or float16, but got float64");
  expect_error([&] { dequantize_fp8(q, ones({2}, DType::Float32)); }, ErrorKind::Runtime, "scale must be [5]");
}

}  // namespace
