// The Vulkan attention kernel against the CPU kernel on the same inputs (the CPU tests
// hold it to its scalar reference): attention_decode over a KV cache with grouped-query
// heads (ratios 1..8), head dims 64/128/256, context lengths 1, odd, past one tile of 128
// keys and past the split into chunks of 256, float32/float16/bfloat16 caches; scaled_dot_product_attention with
// is_causal, float masks (broadcast over heads, fully masked rows), enable_gqa and
// strided operands, bool masks; the errors of what has no Vulkan kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "kiln/generator.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::expect_error;
using testing::storage_eps;
using testing::uniform;
using VulkanAttention = testing::VulkanTest;

constexpr double kEps32 = std::numeric_limits<float>::epsilon();

// The difference between two float32 evaluations of the same attention output, with q,
// k, v bit-identical on both sides, head dim E, S keys and |v| <= 1:
//  - a score s = scale * q.k summed in float32 moves by at most E eps scale sum|q_e k_e|
//    per side, and sum|q_e k_e| <= |q| |k| (Cauchy-Schwarz), so by
//    dS = 2 E eps scale qk between the two, qk = max |q| * max |k| over the rows;
//  - the weights e^(s - m) then differ relatively by 2 dS, plus exp's 3 + 2|x| ulp on the
//    device (|x| <= 2 scale qk), the sum's S eps and the division's 3 ulp;
//  - the output, a convex combination of values, moves by at most that.
// A bias of magnitude <= bias_max widens |x| by 2 bias_max and adds one rounding of
// s + b per score. A narrow output adds one unit of its storage on top (rtol).
struct Tolerance {
  double rtol, atol;
};
double max_row_norm(const Tensor& t) {
  return std::sqrt(amax(sum(square(t.to(DType::Float32)), {-1})).item().to_double());
}
Tolerance attention_tolerance(const Tensor& q, const Tensor& k, int64_t S, double scale, DType dt,
                              double bias_max = 0) {
  const double e = static_cast<double>(q.size(-1)), s = static_cast<double>(S);
  const double qk = scale * max_row_norm(q) * max_row_norm(k);
  const double d_score = 2 * e * kEps32 * qk + 2 * (qk + bias_max) * kEps32;
  return {storage_eps(dt), 2 * d_score + (3 + 4 * (qk + bias_max) + s + 3) * kEps32};
}

const DType kDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16};

TEST_F(VulkanAttention, DecodeAgainstGqaCacheMatchesCpu) {
  struct Shape4 {
    int64_t B, Hq, Hkv, E;
  };
  const Shape4 shapes[] = {{1, 8, 8, 64}, {1, 8, 4, 128}, {1, 16, 2, 128}, {2, 8, 1, 64}, {1, 4, 1, 256}};
  uint64_t seed = 1;
  for (DType dt : kDTypes) {
    for (const Shape4& g : shapes) {
      const int64_t capacity = 1000;
      const Tensor k_cache = uniform({g.B, g.Hkv, capacity, g.E}, -1, 1, ++seed, dt);
      const Tensor v_cache = uniform({g.B, g.Hkv, capacity, g.E}, -1, 1, ++seed, dt);
      const Tensor q = uniform({g.B, g.Hq, g.E}, -1, 1, ++seed, dt);
      const Tensor kd = k_cache.to(kVulkan), vd = v_cache.to(kVulkan), qd = q.to(kVulkan);
      // Past 256 keys a decode step splits its keys over work groups (1 chunk, 2, 4).
      for (int64_t len : {int64_t{1}, int64_t{37}, int64_t{128}, int64_t{129}, int64_t{301}, int64_t{1000}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " B=" + std::to_string(g.B) + " Hq=" + std::to_string(g.Hq) +
                     " Hkv=" + std::to_string(g.Hkv) + " E=" + std::to_string(g.E) + " len=" + std::to_string(len));
        const Tensor expected = attention_decode(q, k_cache, v_cache, len);
        const Tensor got = attention_decode(qd, kd, vd, len);
        EXPECT_EQ(got.device().type, DeviceType::Vulkan);
        const Tolerance tol = attention_tolerance(q, k_cache, len, 1.0 / std::sqrt(static_cast<double>(g.E)), dt);
        expect_close(got, expected, tol.rtol, tol.atol);
      }
    }
  }
}

TEST_F(VulkanAttention, DecodeWithExplicitScaleAndStridedCache) {
  // A cache laid out [B, S_max, Hkv, E] and viewed [B, Hkv, S_max, E] (strided heads).
  for (DType dt : kDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor k_cache = uniform({1, 50, 2, 64}, -1, 1, 11, dt).transpose(1, 2);
    const Tensor v_cache = uniform({1, 50, 2, 64}, -1, 1, 12, dt).transpose(1, 2);
    const Tensor q = uniform({1, 6, 64}, -1, 1, 13, dt);
    const double scale = 0.3;
    const Tensor expected = attention_decode(q, k_cache, v_cache, 41, scale);
    const Tensor got = attention_decode(q.to(kVulkan), k_cache.to(kVulkan).transpose(1, 2).contiguous().transpose(1, 2),
                                        v_cache.to(kVulkan), 41, scale);
    const Tolerance tol = attention_tolerance(q, k_cache, 41, scale, dt);
    expect_close(got, expected, tol.rtol, tol.atol);
  }
}

TEST_F(VulkanAttention, PrefillCausalAndMasksMatchCpu) {
  for (DType dt : kDTypes) {
    // Few queries over many keys (2 x 700) take the split path: chunks of keys merged.
    for (const auto& [L, S] : {std::pair<int64_t, int64_t>{1, 4}, {5, 8}, {130, 133}, {2, 700}}) {
      const int64_t E = 64, Hq = 4, Hkv = 2;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " L=" + std::to_string(L) + " S=" + std::to_string(S));
      const Tensor q = uniform({1, Hq, L, E}, -1, 1, 21, dt);
      const Tensor k = uniform({1, Hkv, S, E}, -1, 1, 22, dt);
      const Tensor v = uniform({1, Hkv, S, E}, -1, 1, 23, dt);
      const Tensor qd = q.to(kVulkan), kd = k.to(kVulkan), vd = v.to(kVulkan);
      const Tolerance tol = attention_tolerance(q, k, S, 1.0 / 8.0, dt);
      // is_causal, top-left: query i sees keys 0..i.
      expect_close(scaled_dot_product_attention(qd, kd, vd, std::nullopt, 0.0, true, std::nullopt, true),
                   scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true, std::nullopt, true), tol.rtol,
                   tol.atol);
      // A float mask [L, S] broadcast over heads: random finite values and -inf, with
      // query 0 hidden from every key (its row comes out as zeros).
      Tensor mask = uniform({L, S}, -2, 2, 24, DType::Float32);
      mask = where(lt(uniform({L, S}, 0, 1, 25, DType::Float32), Scalar(0.3)),
                   Scalar(-std::numeric_limits<double>::infinity()), mask);
      mask.narrow(0, 0, 1).fill_(Scalar(-std::numeric_limits<double>::infinity()));
      const Tensor expected = scaled_dot_product_attention(q, k, v, mask, 0.0, false, std::nullopt, true);
      const Tensor got = scaled_dot_product_attention(qd, kd, vd, mask.to(kVulkan), 0.0, false, std::nullopt, true);
      const Tolerance masked = attention_tolerance(q, k, S, 1.0 / 8.0, dt, 2.0);
      expect_close(got, expected, masked.rtol, masked.atol);
      EXPECT_EQ(amax(abs(got.to(kCPU).narrow(2, 0, 1).to(DType::Float32))).item().to_double(), 0.0);
    }
  }
}

TEST_F(VulkanAttention, BroadcastBatchesStridedQueryAndScalarMask) {
  const Tensor q = uniform({2, 3, 7, 32}, -1, 1, 31, DType::Float32).transpose(1, 2);  // [2, 7, 3, 32] strided
  const Tensor k = uniform({1, 3, 9, 32}, -1, 1, 32, DType::Float32).transpose(1, 2);  // broadcast batch
  const Tensor v = uniform({2, 1, 9, 48}, -1, 1, 33, DType::Float32);                   // broadcast head, Ev != E
  const Tensor qv = q.transpose(1, 2), kv = k.transpose(1, 2);
  const Tolerance tol = attention_tolerance(q, k, 9, 1.0 / std::sqrt(32.0), DType::Float32);
  expect_close(scaled_dot_product_attention(qv.to(kVulkan), kv.to(kVulkan), v.to(kVulkan)),
               scaled_dot_product_attention(qv, kv, v), tol.rtol, tol.atol);
  // A 0-dim CPU mask joins device operands as a number does.
  const Tensor scalar_mask = full({}, Scalar(0.5), DType::Float32);
  const Tolerance masked = attention_tolerance(q, k, 9, 1.0 / std::sqrt(32.0), DType::Float32, 0.5);
  expect_close(scaled_dot_product_attention(qv.to(kVulkan), kv.to(kVulkan), v.to(kVulkan), scalar_mask),
               scaled_dot_product_attention(qv, kv, v, scalar_mask), masked.rtol, masked.atol);
}

TEST_F(VulkanAttention, EmptyAndZeroLengthContexts) {
  const Tensor q = uniform({1, 2, 16}, -1, 1, 41, DType::Float32).to(kVulkan);
  const Tensor cache = zeros({1, 1, 8, 16}, DType::Float32).to(kVulkan);
  // valid_len 0: nothing to attend to gives zeros (kiln decision 5), on the device too.
  const Tensor none = attention_decode(q, cache, cache, 0);
  EXPECT_EQ(none.device().type, DeviceType::Vulkan);
  EXPECT_EQ(amax(abs(none.to(kCPU))).item().to_double(), 0.0);
  const Tensor no_rows = scaled_dot_product_attention(zeros({0, 2, 3, 16}).to(kVulkan), zeros({0, 2, 4, 16}).to(kVulkan),
                                                      zeros({0, 2, 4, 16}).to(kVulkan));
  EXPECT_EQ(no_rows.numel(), 0);
  EXPECT_EQ(no_rows.device().type, DeviceType::Vulkan);
}

// A bool mask becomes a 0 / -inf bias through where, on the device: the same result,
// bit for bit, as that bias built on the host and uploaded.
TEST_F(VulkanAttention, BoolMaskOnTheDeviceIsItsFloatBias) {
  const Tensor qd = uniform({1, 2, 4, 16}, -1, 1, 53, DType::Float32).to(kVulkan);
  const Tensor bool_mask = le(arange(Scalar(4)).unsqueeze(0), arange(Scalar(4)).unsqueeze(1));
  const Tensor bias = where(bool_mask, Scalar(0.0), Scalar(-std::numeric_limits<double>::infinity()));
  testing::expect_same_bits(scaled_dot_product_attention(qd, qd, qd, bool_mask.to(kVulkan)),
                            scaled_dot_product_attention(qd, qd, qd, bias.to(kVulkan)).to(kCPU));
}

TEST_F(VulkanAttention, RefusesWhatHasNoKernelAndMixedDevices) {
  const Tensor q = uniform({1, 2, 4, 16}, -1, 1, 51, DType::Float32);
  const Tensor qd = q.to(kVulkan);
  expect_error([&] { scaled_dot_product_attention(qd, qd, qd, std::nullopt, 0.5); }, ErrorKind::NotImplemented,
               "dropout");
  expect_error([&] { scaled_dot_product_attention(qd, q, qd); }, ErrorKind::Runtime,
               "Expected all tensors to be on the same device");
  const Tensor mask = zeros({4, 4}, DType::Float32);
  expect_error([&] { scaled_dot_product_attention(qd, qd, qd, mask); }, ErrorKind::Runtime,
               "Expected all tensors to be on the same device");
  const Tensor wide = uniform({1, 1, 2, 1100}, -1, 1, 52, DType::Float32).to(kVulkan);
  expect_error([&] { scaled_dot_product_attention(wide, wide, wide); }, ErrorKind::NotImplemented, "head dims");
  const Tensor f64 = q.to(DType::Float64).to(kVulkan);
  expect_error([&] { scaled_dot_product_attention(f64, f64, f64); }, ErrorKind::NotImplemented, "float64");
}

TEST_F(VulkanAttention, RefusesKeyCountsPast32Bits) {
  // Keys broadcast with stride 0 take no memory, so only the count bounds them.
  const Tensor q = uniform({1, 1, 1, 8}, -1, 1, 53, DType::Float32).to(kVulkan);
  const Tensor kv = q.expand({1, 1, int64_t{1} << 31, 8});
  expect_error([&] { scaled_dot_product_attention(q, kv, kv); }, ErrorKind::Runtime, "keys are too many");
}

}  // namespace
}  // namespace kiln
