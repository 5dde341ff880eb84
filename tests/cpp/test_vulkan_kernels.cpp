// Every Vulkan kernel against the CPU kernel on the same inputs (which the CPU tests hold
// to scalar references): odd sizes, non-contiguous and broadcast operands, each float
// storage dtype. Tolerances are derived next to each check from Vulkan's precision
// rules (add/mul exact, division 2.5 ulp, exp 3 + 2|x| ulp, log 3 ulp or 2^-21 near 1)
// plus the reduction length, plus one unit of the result dtype where it is narrower.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <limits>

#include "bf16_dot_mode.h"
#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::expect_error;
using testing::expect_same_bits;
using testing::storage_eps;
using testing::uniform;
using VulkanKernels = testing::VulkanTest;

constexpr double kEps32 = std::numeric_limits<float>::epsilon();

const DType kFloatDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16};

TEST_F(VulkanKernels, BinaryOpsMatchCpuOnBroadcastAndStridedOperands) {
  struct Case {
    const char* name;
    Tensor (*fn)(const Tensor&, const Tensor&);
    double ulps;  // Vulkan's bound for the op in float32
  };
  const Case cases[] = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b, Scalar(0.5)); }, 2},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, 1},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, 1},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, 3},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, 0},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, 0},
  };
  for (DType dt : kFloatDTypes) {
    for (int64_t n : {1, 7, 255, 257}) {
      const Tensor a = uniform({3, n}, -4, 4, 1, dt);
      const Tensor b = uniform({n, 3}, 0.5, 3, 2, dt).t();  // strided
      const Tensor row = uniform({n}, -2, 2, 3, dt);       // broadcast
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dt)) + " n=" + std::to_string(n));
        const double rtol = c.ulps * kEps32 + storage_eps(dt);
        expect_close(c.fn(a.to(kVulkan), b.to(kVulkan)), c.fn(a, b), rtol, 0);
        expect_close(c.fn(a.to(kVulkan), row.to(kVulkan)), c.fn(a, row), rtol, 0);
      }
    }
  }
}

TEST_F(VulkanKernels, ScalarOperandsAndComparisons) {
  Tensor a = uniform({5, 37}, -3, 3, 4);
  a.select(0, 2).select(0, 5).fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
  const Tensor b = uniform({5, 37}, -3, 3, 5);
  const Tensor da = a.to(kVulkan), db = b.to(kVulkan);
  expect_close(add(da, Scalar(2.5)), add(a, Scalar(2.5)), 0, 0);
  expect_close(mul(da, Scalar(-0.25)), mul(a, Scalar(-0.25)), 0, 0);
  expect_close(maximum(da, db), maximum(a, b), 0, 0);  // NaN propagates
  expect_same_bits(lt(da, db), lt(a, b));
  expect_same_bits(ge(da, db), ge(a, b));
  expect_same_bits(eq(da, da), eq(a, a));  // NaN != NaN
  expect_same_bits(ne(da, db), ne(a, b));
}

TEST_F(VulkanKernels, UnaryOpsMatchCpu) {
  struct Case {
    const char* name;
    Tensor (*fn)(const Tensor&);
    double lo, hi;
    double ulps;   // relative bound in float32 ulps on this range
    double atol;   // absolute part (log near 1: 2^-21)
  };
  const Case cases[] = {
      {"neg", [](const Tensor& x) { return neg(x); }, -4, 4, 0, 0},
      {"abs", [](const Tensor& x) { return abs(x); }, -4, 4, 0, 0},
      {"square", [](const Tensor& x) { return square(x); }, -4, 4, 1, 0},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, 0.25, 4, 3, 0},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0, 9, 4, 0},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.01, 9, 8, 0},
      // exp: 3 + 2|x| ulp with |x| <= 4.
      {"exp", [](const Tensor& x) { return exp(x); }, -4, 4, 12, 0},
      {"log", [](const Tensor& x) { return log(x); }, 0.05, 20, 4, std::ldexp(1.0, -21)},
      // sigmoid/silu: exp's 12 ulp plus an add and a division.
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -4, 4, 16, 0},
      {"silu", [](const Tensor& x) { return silu(x); }, -4, 4, 17, 0},
      {"relu", [](const Tensor& x) { return relu(x); }, -4, 4, 0, 0},
      {"floor", [](const Tensor& x) { return floor(x); }, -4, 4, 0, 0},
      {"ceil", [](const Tensor& x) { return ceil(x); }, -4, 4, 0, 0},
      {"round", [](const Tensor& x) { return round(x); }, -4, 4, 0, 0},
      {"trunc", [](const Tensor& x) { return trunc(x); }, -4, 4, 0, 0},
  };
  for (DType dt : kFloatDTypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dt)));
      const Tensor x = uniform({7, 131}, c.lo, c.hi, 6, dt);
      const Tensor strided = x.t();
      expect_close(c.fn(x.to(kVulkan)), c.fn(x), c.ulps * kEps32 + storage_eps(dt), c.atol);
      expect_close(c.fn(x.to(kVulkan).t()), c.fn(strided), c.ulps * kEps32 + storage_eps(dt), c.atol);
    }
  }
}

TEST_F(VulkanKernels, SoftmaxAndLogSoftmaxMatchCpu) {
  for (DType dt : kFloatDTypes) {
    for (int64_t n : {1, 7, 255, 256, 257, 1000}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      const Tensor x = uniform({3, n}, -8, 8, 7, dt);
      // exp: 3 + 2 * 16 ulp over differences up to 16; the sum's rounding grows with
      // log2(n) in a tree and n in the CPU's order: 64 ulp covers n <= 1000 in practice
      // (the worst case n * eps is far from reached with positive terms of random sign-free size).
      const double rtol = 64 * kEps32 + storage_eps(dt);
      // Probabilities below float16's normal range keep only absolute precision: one
      // subnormal step (2^-24) apart is one rounding.
      const double atol = dt == DType::Float16 ? std::ldexp(1.0, -24) : 1e-9;
      expect_close(softmax(x.to(kVulkan), -1), softmax(x, -1), rtol, atol);
      // log_softmax: absolute error of x - max - log(sum) with |values| <= 16 + log(n).
      expect_close(log_softmax(x.to(kVulkan), -1), log_softmax(x, -1), rtol, 64 * kEps32 * 24);
      // Over a middle dim (inner > 1) and a transposed input.
      const Tensor y = uniform({4, n, 3}, -8, 8, 8, dt);
      expect_close(softmax(y.to(kVulkan), 1), softmax(y, 1), rtol, atol);
      expect_close(softmax(y.to(kVulkan).transpose(0, 2), 1), softmax(y.transpose(0, 2), 1), rtol, atol);
    }
  }
  // A row of -inf and one holding NaN give NaN, as on the CPU.
  Tensor z = uniform({2, 9}, -1, 1, 9);
  z.select(0, 0).fill_(Scalar(-std::numeric_limits<double>::infinity()));
  z.select(0, 1).select(0, 4).fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
  expect_close(softmax(z.to(kVulkan), -1), softmax(z, -1), 0, 0);
}

TEST_F(VulkanKernels, RmsNormMatchesCpu) {
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (int64_t cols : {1, 7, 255, 256, 257, 1024}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " cols=" + std::to_string(cols));
      const Tensor x = uniform({5, cols}, -3, 3, 10, dt);
      const Tensor w = uniform({cols}, 0.5, 1.5, 11, dt);
      // The sum of cols squares: up to cols/2 ulp relative after the square root in the
      // worst order, plus the square root and the products.
      const double rtol = (cols / 2.0 + 16) * kEps32 + storage_eps(dt);
      expect_close(rms_norm(x.to(kVulkan), {cols}, w.to(kVulkan), 1e-6), rms_norm(x, {cols}, w, 1e-6), rtol, 0);
      expect_close(rms_norm(x.to(kVulkan), {cols}), rms_norm(x, {cols}), rtol, 0);
      expect_close(rms_norm_llama(x.to(kVulkan), w.to(kVulkan), 1e-6), rms_norm_llama(x, w, 1e-6),
                   rtol + 2 * storage_eps(dt), 0);
      expect_close(rms_norm_one_plus(x.to(kVulkan), w.to(kVulkan), 1e-6), rms_norm_one_plus(x, w, 1e-6), rtol, 0);
    }
  }
}

// |y_vulkan - y_cpu| <= 2 K eps sum_k |x_k w_k| (both sums' worst-case rounding) plus
// one unit of the result dtype.
void expect_linear_close(const Tensor& got, const Tensor& want, const Tensor& x, const Tensor& w, int64_t K) {
  const Tensor bound = linear(abs(x.to(DType::Float32)), abs(w.to(DType::Float32)));
  const double scale = amax(bound).item().to_double();
  expect_close(got, want, storage_eps(want.dtype()), 2 * K * kEps32 * scale + 1e-30);
}

TEST_F(VulkanKernels, LinearMatchesCpuForEveryWeightDType) {
  for (DType dt : kFloatDTypes) {
    for (int64_t K : {1, 7, 127, 128, 129, 300}) {
      for (int64_t N : {1, 3, 65}) {
        for (int64_t M : {1, 3}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                       " K=" + std::to_string(K));
          const Tensor x = uniform({M, K}, -1, 1, 12, dt);
          const Tensor w = uniform({N, K}, -1, 1, 13, dt);
          const Tensor b = uniform({N}, -1, 1, 14, dt);
          expect_linear_close(linear(x.to(kVulkan), w.to(kVulkan)), linear(x, w), x, w, K);
          expect_linear_close(linear(x.to(kVulkan), w.to(kVulkan), b.to(kVulkan)), linear(x, w, b), x, w, K);
        }
      }
    }
  }
  // A weight whose rows are strided (a column slice of a wider matrix).
  const Tensor wide = uniform({9, 40}, -1, 1, 15);
  const Tensor x = uniform({1, 17}, -1, 1, 16);
  expect_linear_close(linear(x.to(kVulkan), wide.to(kVulkan).narrow(1, 3, 17)), linear(x, wide.narrow(1, 3, 17)), x,
                      wide.narrow(1, 3, 17), 17);
}

TEST_F(VulkanKernels, LinearFp8WithRowAndBlockScalesMatchesCpu) {
  // The shaders multiply float32 x: the CPU's float32 path is their oracle (its bf16 dot
  // path would round x to bf16 first).
  const bf16_dot_test::Bf16DotMode float32_cpu(0);
  for (int64_t K : {5, 128, 129, 300}) {
    for (int64_t N : {3, 130}) {
      SCOPED_TRACE("N=" + std::to_string(N) + " K=" + std::to_string(K));
      const Tensor w = uniform({N, K}, -1, 1, 17).to(DType::Float8_e4m3fn);
      const Tensor x = uniform({1, K}, -1, 1, 18);
      const Tensor row_scale = uniform({N}, 0.5, 2, 19);
      const Tensor block_scale = uniform({(N + 127) / 128, (K + 127) / 128}, 0.5, 2, 20);
      for (const Tensor& scale : {row_scale, block_scale}) {
        const Tensor want = linear_fp8(x, w, scale);
        const Tensor got = linear_fp8(x.to(kVulkan), w.to(kVulkan), scale.to(kVulkan));
        expect_linear_close(got, want, x, mul(w.to(DType::Float32), Scalar(2.0)), K);
      }
    }
  }
}

TEST_F(VulkanKernels, ReductionsMatchCpu) {
  for (DType dt : kFloatDTypes) {
    for (int64_t n : {1, 7, 255, 256, 257, 2000}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      Tensor x = uniform({3, n}, -2, 2, 21, dt);
      const Tensor d = x.to(kVulkan);
      // Sums: both sides' rounding, at most n ulp of sum |x| each (worst case), and the
      // result's storage rounding; max/min are exact.
      const double sum_atol = 2 * n * kEps32 * 2 * n;
      expect_close(sum(d, {-1}), sum(x, {-1}), storage_eps(dt), sum_atol);
      expect_close(mean(d, {-1}, true), mean(x, {-1}, true), storage_eps(dt), sum_atol / n);
      expect_close(amax(d, {-1}), amax(x, {-1}), 0, 0);
      expect_close(amin(d, {1}), amin(x, {1}), 0, 0);
      // Over the first dim (moved last on the device) and over all dims.
      expect_close(sum(d, {0}), sum(x, {0}), storage_eps(dt), 2 * 3 * kEps32 * 6);
      expect_close(amax(d.t(), {1}), amax(x.t(), {1}), 0, 0);
      expect_close(sum(d, {0, 1}), sum(x, {0, 1}), storage_eps(dt), 2 * 3 * n * kEps32 * 2 * 3 * n);
    }
  }
  Tensor z = uniform({2, 9}, -1, 1, 22);
  z.select(0, 1).select(0, 4).fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
  expect_close(amax(z.to(kVulkan), {1}), amax(z, {1}), 0, 0);  // NaN wins
  expect_close(amin(z.to(kVulkan), {1}), amin(z, {1}), 0, 0);
}

TEST_F(VulkanKernels, RotaryEmbeddingMatchesCpu) {
  const Tensor positions = add(arange(Scalar(int64_t{0}), Scalar(int64_t{5}), Scalar(int64_t{1}), DType::Int64),
                               Scalar(int64_t{1000}));
  for (DType dt : kFloatDTypes) {
    for (int64_t head_dim : {2, 16, 66}) {
      // The whole head, and a partial rotary_dim (even, about half) whose tail is copied.
      const int64_t partial = std::max<int64_t>(head_dim / 2 & ~int64_t{1}, 2);
      for (const std::optional<int64_t> rotary : {std::optional<int64_t>(), std::optional<int64_t>(partial)}) {
        for (bool interleaved : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " head_dim=" + std::to_string(head_dim) +
                       (interleaved ? " interleaved" : "") + " rotary=" + std::to_string(rotary.value_or(head_dim)));
          const Tensor x = uniform({2, 5, 3, head_dim}, -1, 1, 23, dt);
          // x c -/+ y s with |x|, |y|, |c|, |s| <= 1: two products and a sum, each rounded.
          const double tol = 4 * kEps32;
          expect_close(apply_rotary_emb(x.to(kVulkan), positions.to(kVulkan), 10000.0, rotary, interleaved),
                       apply_rotary_emb(x, positions, 10000.0, rotary, interleaved), tol + storage_eps(dt), tol);
        }
      }
    }
  }
}

TEST_F(VulkanKernels, EmbeddingAndIndexSelectMatchCpu) {
  Generator gen(24);
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float8_e4m3fn, DType::Int64, DType::Bool}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor weight = uniform({50, 33}, -1, 1, 25).to(dt);
    const Tensor ids = randint(0, 50, {3, 7}, DType::Int64, &gen);
    const Tensor got = embedding(weight.to(kVulkan), ids.to(kVulkan));
    expect_same_bits(got, embedding(weight, ids));
    const Tensor cube = uniform({4, 9, 5}, -1, 1, 26).to(dt);
    const Tensor pick = randint(0, 9, {11}, DType::Int32, &gen);
    expect_same_bits(index_select(cube.to(kVulkan), 1, pick.to(kVulkan)), index_select(cube, 1, pick));
    expect_same_bits(index_select(cube.to(kVulkan).transpose(0, 2), 1, pick.to(kVulkan).narrow(0, 2, 4)),
                     index_select(cube.transpose(0, 2), 1, pick.narrow(0, 2, 4)));
  }
  const Tensor weight = ones({5, 3}).to(kVulkan);
  expect_error([&] { embedding(weight, full({2}, Scalar(int64_t{5}), DType::Int64).to(kVulkan)); }, ErrorKind::Index,
               "out of range");
}

TEST_F(VulkanKernels, MixedDevicesAndMissingKernelsAreClearErrors) {
  const Tensor host = ones({3});
  const Tensor dev = ones({3}).to(kVulkan);
  expect_error([&] { add(host, dev); }, ErrorKind::Runtime,
               "Expected all tensors to be on the same device, but found at least two devices, cpu and vulkan:0!");
  expect_error([&] { mul(dev, host); }, ErrorKind::Runtime, "found at least two devices, vulkan:0 and cpu!");
  expect_error([&] { linear(ones({1, 3}), dev.view({1, 3})); }, ErrorKind::Runtime, "same device");
  expect_error([&] { expm1(dev); }, ErrorKind::NotImplemented, "no vulkan kernel for float32 tensors yet");
  expect_error([&] { gather(ones({3}), 0, zeros({3}, DType::Int64).to(kVulkan)); }, ErrorKind::Runtime,
               "same device");
  expect_error([&] { masked_fill(ones({3}), ones({3}, DType::Bool).to(kVulkan), Scalar(1.0)); }, ErrorKind::Runtime,
               "same device");
  // A 0-dim CPU tensor joins a device tensor, like a Python number.
  expect_close(add(dev, scalar_tensor(Scalar(2.0), DType::Float32)), full({3}, Scalar(3.0)), 0, 0);
}

}  // namespace
}  // namespace kiln
