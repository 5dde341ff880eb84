// The Vulkan gated delta rule (shaders/gated_delta_rule.comp, behind both
// gated_delta_rule and gated_delta_rule_chunked) and the gated rms_norm of the Gated
// DeltaNet layer against the CPU kernels, which test_gated_delta*.cpp hold to float64
// references; here both sides also meet that reference.
//
// Tolerance of the rule: each side is within B = 4 T (dk + dv + 8) u max(1, max |out|)
// of the float64 recurrence (gated_delta_reference.h: per token a dot product of length
// dk, an update of one multiply-add per entry, errors adding up over T tokens), so the
// two are within 2 B of each other; the state within 4 B each, 8 B apart.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "gated_delta_reference.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using namespace gated_delta_testing;
using testing::expect_close;
using testing::expect_error;
using testing::storage_eps;
using testing::uniform;
using VulkanGatedDelta = testing::VulkanTest;

constexpr double kEps32 = std::numeric_limits<float>::epsilon();

struct Geometry {
  int64_t Hk, Hv, dk, dv;
  std::string describe() const {
    return "Hk " + std::to_string(Hk) + " Hv " + std::to_string(Hv) + " dk " + std::to_string(dk) + " dv " +
           std::to_string(dv);
  }
};

// Runs the rule (or its chunked entry) on the CPU and on the device from the same
// inputs and state, and checks both against the float64 reference and each other.
void expect_device_matches(const RuleInputs& in, const Geometry& s, int64_t T, bool l2, bool chunked,
                           Tensor& cpu_state, Tensor& dev_state) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
  const RuleReference ref = rule_reference(values(in.q), values(in.k), values(in.v), values(in.g), values(in.beta),
                                           values(cpu_state), T, s.Hk, s.Hv, s.dk, s.dv, l2, scale);
  const auto run = [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& b,
                       Tensor& state) {
    return chunked ? gated_delta_rule_chunked(q, k, v, g, b, state, l2) : gated_delta_rule(q, k, v, g, b, state, l2);
  };
  const Tensor want = run(in.q, in.k, in.v, in.g, in.beta, cpu_state);
  const Tensor got = run(in.q.to(kVulkan), in.k.to(kVulkan), in.v.to(kVulkan), in.g.to(kVulkan),
                         in.beta.to(kVulkan), dev_state);
  ASSERT_EQ(got.device().type, DeviceType::Vulkan);
  ASSERT_EQ(got.sizes(), (Shape{T, s.Hv, s.dv}));
  const Tensor got_cpu = got.to(kCPU), got_state = dev_state.to(kCPU);
  expect_rule_close(got_cpu, got_state, ref, T, s.dk, s.dv);
  const double bound = 4.0 * static_cast<double>(std::max<int64_t>(T, 1) * (s.dk + s.dv + 8)) * kU *
                       ref.scale_of_out;
  expect_close(got, want, 0, 2 * bound);
  expect_close(dev_state, cpu_state, 0, 8 * bound);
}

TEST_F(VulkanGatedDelta, RecurrentAndChunkedEntriesMatchCpuOverSizes) {
  std::mt19937 rng(21);
  // One head; dv below, at and above the 32-column work group, not multiples of it; dk
  // odd and above 128; value heads sharing key heads.
  for (const Geometry& s : {Geometry{1, 1, 1, 1}, Geometry{1, 1, 7, 33}, Geometry{2, 4, 16, 31},
                            Geometry{1, 3, 9, 65}, Geometry{2, 2, 130, 8}, Geometry{1, 2, 32, 32}}) {
    for (int64_t T : {1, 3, 17}) {
      for (bool l2 : {true, false}) {
        for (bool chunked : {false, true}) {
          SCOPED_TRACE(s.describe() + " T " + std::to_string(T) + (l2 ? " l2" : "") + (chunked ? " chunked" : ""));
          RuleInputs in = rule_inputs(T, s.Hk, s.Hv, s.dk, s.dv, rng);
          if (!l2) {  // unnormalised unit-scale q and k would grow the state
            in.q = mul(in.q, Scalar(1.0 / static_cast<double>(s.dk)));
            in.k = mul(in.k, Scalar(1.0 / static_cast<double>(s.dk)));
          }
          Tensor cpu_state = in.state.clone();
          Tensor dev_state = in.state.to(kVulkan);
          expect_device_matches(in, s, T, l2, chunked, cpu_state, dev_state);
        }
      }
    }
  }
}

// A prompt through the chunked entry, then decode steps through the recurrent one, the
// state carried on each side as the model carries it.
TEST_F(VulkanGatedDelta, PromptThenDecodeStepsCarryTheState) {
  std::mt19937 rng(22);
  const Geometry s{2, 4, 24, 40};
  RuleInputs first = rule_inputs(9, s.Hk, s.Hv, s.dk, s.dv, rng);
  Tensor cpu_state = first.state.clone();
  Tensor dev_state = first.state.to(kVulkan);
  expect_device_matches(first, s, 9, true, true, cpu_state, dev_state);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const RuleInputs in = rule_inputs(1, s.Hk, s.Hv, s.dk, s.dv, rng);
    expect_device_matches(in, s, 1, true, false, cpu_state, dev_state);
  }
}

// Strided and bfloat16 operands (the model's q, k, v are column slices of the conv
// output) are widened on the device first; a custom scale; an empty prompt.
TEST_F(VulkanGatedDelta, StridedNarrowInputsCustomScaleAndNoTokens) {
  std::mt19937 rng(23);
  const int64_t T = 5, Hk = 2, Hv = 2, dk = 8, dv = 12;
  const Tensor mixed = random_tensor({T, 2 * Hk * dk + Hv * dv}, rng);
  const Tensor g = mul(abs(random_tensor({T, Hv}, rng)), Scalar(-1.0));
  const Tensor beta = sigmoid(random_tensor({T, Hv}, rng));
  const Tensor state = random_tensor({Hv, dk, dv}, rng, 0.5);
  const auto split = [&](const Tensor& m) {
    return std::array<Tensor, 3>{m.narrow(1, 0, Hk * dk).reshape({T, Hk, dk}),
                                 m.narrow(1, Hk * dk, Hk * dk).reshape({T, Hk, dk}),
                                 m.narrow(1, 2 * Hk * dk, Hv * dv).reshape({T, Hv, dv}).to(DType::BFloat16)};
  };
  const auto host = split(mixed);
  const auto dev = split(mixed.to(kVulkan));
  Tensor cpu_state = state.clone();
  Tensor dev_state = state.to(kVulkan);
  const Tensor want = gated_delta_rule(host[0], host[1], host[2], g, beta, cpu_state, true, 0.3);
  const Tensor got =
      gated_delta_rule(dev[0], dev[1], dev[2], g.to(kVulkan), beta.to(kVulkan), dev_state, true, 0.3);
  const double bound = 4.0 * T * (dk + dv + 8) * kU * std::max(1.0, amax(abs(want)).item().to_double());
  expect_close(got, want, 0, 2 * bound);
  expect_close(dev_state, cpu_state, 0, 8 * bound);

  const Tensor none = gated_delta_rule(dev[0].narrow(0, 0, 0), dev[1].narrow(0, 0, 0), dev[2].narrow(0, 0, 0),
                                       g.to(kVulkan).narrow(0, 0, 0), beta.to(kVulkan).narrow(0, 0, 0), dev_state);
  EXPECT_EQ(none.device().type, DeviceType::Vulkan);
  EXPECT_EQ(none.sizes(), (Shape{0, Hv, dv}));
  expect_close(dev_state, cpu_state, 0, 8 * bound);  // untouched
}

TEST_F(VulkanGatedDelta, BadInputsAreClearErrors) {
  const Tensor q = ones({1, 1, 4}).to(kVulkan), v = ones({1, 1, 3}).to(kVulkan), gate = ones({1, 1}).to(kVulkan);
  Tensor dev_state = zeros({1, 4, 3}).to(kVulkan);
  Tensor host_state = zeros({1, 4, 3});
  expect_error([&] { gated_delta_rule(q, q, v, gate, gate, host_state); }, ErrorKind::Runtime,
               "Expected all tensors to be on the same device");
  expect_error([&] { gated_delta_rule(q, q, v.to(kCPU), gate, gate, dev_state); }, ErrorKind::Runtime, "same device");
  expect_error([&] { gated_delta_rule_chunked(q, q, v, gate, gate, dev_state, true, std::nullopt, 65); },
               ErrorKind::Value, "chunk_size must be in [1, 64]");
  // The key dim is held in registers and shared memory: bounded, and said so.
  const Tensor wide = ones({1, 1, 1025}).to(kVulkan);
  Tensor wide_state = zeros({1, 1025, 3}).to(kVulkan);
  expect_error([&] { gated_delta_rule(wide, wide, v, gate, gate, wide_state); }, ErrorKind::NotImplemented,
               "key_dim up to 1024, got 1025");
}

// rms_norm_gated: n = round(w round(x r, in), promote(in, w)); y = n silu(gate).
// Tolerance: the sum of squares as rms_norm's (cols / 2 + 16 ulp), silu's exp, add and
// division on either side (16 ulp with |gate| <= 4), and up to three roundings through
// the storage dtype (the normalised row, the weighted row, the result) that a one-ulp
// difference before them can move by a unit each.
TEST_F(VulkanGatedDelta, GatedRmsNormMatchesCpu) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
    for (int64_t cols : {1, 7, 64, 257}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " cols " + std::to_string(cols));
      const Tensor x = uniform({3, 2, cols}, -2, 2, 31, dt);
      const Tensor gate = uniform({3, 2, cols}, -4, 4, 32, dt);
      const Tensor w = uniform({cols}, 0.5, 1.5, 33, dt);
      const double rtol = (static_cast<double>(cols) / 2 + 32) * kEps32 + 3 * storage_eps(dt);
      const Tensor want = rms_norm_gated(x, gate, w, 1e-6);
      const Tensor got = rms_norm_gated(x.to(kVulkan), gate.to(kVulkan), w.to(kVulkan), 1e-6);
      EXPECT_EQ(got.dtype(), want.dtype());
      expect_close(got, want, rtol, 1e-30);
    }
  }
  expect_error([&] { rms_norm_gated(ones({2, 4}).to(kVulkan), ones({2, 4}), ones({4}).to(kVulkan), 1e-6); },
               ErrorKind::Runtime, "same device");
}

}  // namespace
}  // namespace kiln
