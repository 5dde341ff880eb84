// The Vulkan causal depthwise conv with a carried state (kiln::causal_conv1d, the conv of
// LFM2's short convolution and of the Gated DeltaNet layer) against the CPU kernel, which
// test_gated_delta.cpp holds to a scalar reference: a prompt and then single tokens, the
// state carried on each side, every kernel size the models use and odd channel counts.
//
// Tolerance: out = act(sum_{j<K} w_j u_j) in float32 on both sides: each sum is within
// K eps sum |w_j u_j| of the exact one (any order), so the two within 2 K eps B with
// B = max sum |w u|; silu's slope is at most 1.1 and its own evaluation on the device
// adds exp's 3 + 2|a| ulp plus an add and a division. The state is a copy: exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "kiln/ops/creation.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/ops/shape.h"
#include "test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::expect_error;
using testing::expect_same_bits;
using testing::storage_eps;
using testing::uniform;
using VulkanConv = testing::VulkanTest;

constexpr double kEps32 = std::numeric_limits<float>::epsilon();
// Inputs and state in [-2, 2], taps in [-1, 1]: |acc| <= B = 2 K.
constexpr double kInputBound = 2;

void expect_conv_close(const Tensor& got, const Tensor& want, int64_t kernel, bool silu, DType dt) {
  const double bound = kInputBound * static_cast<double>(kernel);
  const double atol = (silu ? 1.1 : 1.0) * 2 * static_cast<double>(kernel) * kEps32 * bound;
  const double rtol = (silu ? 3 + 2 * bound + 4 : 0) * kEps32 + storage_eps(dt);
  expect_close(got, want, rtol, atol);
}

TEST_F(VulkanConv, PromptThenTokensMatchesCpuWithTheStateCarried) {
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (int64_t kernel : {1, 2, 3, 4}) {
      for (int64_t channels : {1, 7, 255, 257}) {
        for (bool silu : {true, false}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " K=" + std::to_string(kernel) + " C=" +
                       std::to_string(channels) + (silu ? " silu" : " none"));
          const char* act = silu ? "silu" : "none";
          const Tensor weight = uniform({channels, kernel}, -1, 1, 1, dt);
          const Tensor dweight = weight.to(kVulkan);
          // A history left by an earlier call, the same on both sides.
          Tensor state = uniform({kernel - 1, channels}, -2, 2, 2);
          Tensor dstate = state.to(kVulkan);
          // A prompt of 37 tokens (fewer than the history for none of these K: also 2).
          for (int64_t tokens : {37, 2, 1, 1, 1}) {
            const Tensor x = uniform({tokens, channels}, -2, 2, static_cast<uint64_t>(3 + tokens), dt);
            const Tensor want = causal_conv1d(x, weight, state, act);
            const Tensor got = causal_conv1d(x.to(kVulkan), dweight, dstate, act);
            EXPECT_EQ(got.dtype(), dt);
            expect_conv_close(got, want, kernel, silu, dt);
            expect_same_bits(dstate, state);
          }
        }
      }
    }
  }
}

TEST_F(VulkanConv, NonContiguousInputConvLayoutWeightAndEmptyPrompt) {
  const int64_t channels = 33, kernel = 4;
  // x as the transpose of [C, T] and the weight in nn.Conv1d's [C, 1, K] layout.
  const Tensor xt = uniform({channels, 9}, -2, 2, 4);
  const Tensor weight = uniform({channels, 1, kernel}, -1, 1, 5);
  Tensor state = uniform({kernel - 1, channels}, -2, 2, 6);
  Tensor dstate = state.to(kVulkan);
  const Tensor want = causal_conv1d(xt.t(), weight, state);
  const Tensor got = causal_conv1d(xt.to(kVulkan).t(), weight.to(kVulkan), dstate);
  expect_conv_close(got, want, kernel, true, DType::Float32);
  expect_same_bits(dstate, state);
  // A column slice as x: rows strided by more than the channel count.
  const Tensor wide = uniform({5, channels + 8}, -2, 2, 7);
  expect_conv_close(causal_conv1d(wide.to(kVulkan).narrow(1, 3, channels), weight.to(kVulkan), dstate),
                    causal_conv1d(wide.narrow(1, 3, channels), weight, state), kernel, true, DType::Float32);
  expect_same_bits(dstate, state);
  // No tokens: an empty result on the device, the state untouched.
  const Tensor none = causal_conv1d(zeros({0, channels}).to(kVulkan), weight.to(kVulkan), dstate);
  EXPECT_EQ(none.device().type, DeviceType::Vulkan);
  EXPECT_EQ(none.sizes(), (Shape{0, channels}));
  expect_same_bits(dstate, state);
}

TEST_F(VulkanConv, MixedDevicesAreClearErrors) {
  const Tensor x = ones({2, 3}).to(kVulkan);
  const Tensor weight = ones({3, 4});
  Tensor host_state = zeros({3, 3});
  Tensor dev_state = host_state.to(kVulkan);
  expect_error([&] { causal_conv1d(x, weight.to(kVulkan), host_state); }, ErrorKind::Runtime,
               "Expected all tensors to be on the same device");
  expect_error([&] { causal_conv1d(x, weight, dev_state); }, ErrorKind::Runtime, "same device");
  expect_error([&] { causal_conv1d(x, weight.to(kVulkan), dev_state, "gelu"); }, ErrorKind::Value,
               "activation must be");
  expect_error([&] { gated_delta_gates(x, x, ones({3}), ones({3}).to(kVulkan)); }, ErrorKind::Runtime, "same device");
  // The delta rule's own device checks: test_vulkan_gated_delta.cpp.
}

// g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b). Tolerance: exp(A_log) with
// |A_log| <= 2 (7 ulp), softplus's exp of x <= 20 (43 ulp, carried relatively through
// log1p) and log1p's 4 ulp, the adds and the product: 60 ulp; beyond the threshold
// softplus is x itself. sigmoid with |b| <= 4: exp's 11 ulp, an add and a division.
TEST_F(VulkanConv, DeltaGatesMatchCpu) {
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    for (int64_t heads : {1, 5, 257}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " heads=" + std::to_string(heads));
      const Tensor a = uniform({3, heads}, -10, 30, 8, dt), b = uniform({3, heads}, -4, 4, 9, dt);
      const Tensor a_log = uniform({heads}, -2, 2, 10, dt), dt_bias = uniform({heads}, -1, 1, 11, dt);
      const DeltaGates want = gated_delta_gates(a, b, a_log, dt_bias);
      const DeltaGates got = gated_delta_gates(a.to(kVulkan), b.to(kVulkan), a_log.to(kVulkan), dt_bias.to(kVulkan));
      expect_close(got.g, want.g, 60 * kEps32, 0);
      expect_close(got.beta, want.beta, 16 * kEps32, 0);
    }
  }
}

}  // namespace
}  // namespace kiln
