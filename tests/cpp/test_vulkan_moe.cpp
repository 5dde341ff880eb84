// The Vulkan MoE kernels against the CPU kernels on the same inputs (and the expert
// block also against moe_test_util.h's float64 reference with the CPU kernel's error
// bound): routing picks exactly the CPU's experts (ties to the lower id, NaN first) with
// weights within a few float32 roundings, the expert block matches for every weight
// dtype and FP8 scale layout at odd sizes, and the whole decode step (routing then
// experts) stays on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/moe.h"
#include "kiln/vulkan.h"
#include "moe_test_util.h"
#include "test_util.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::expect_error;
using testing::expect_same_bits;
using VulkanMoe = testing::VulkanTest;

constexpr double kEps32 = std::numeric_limits<float>::epsilon();

// [T, E] logits on a grid of distinct values 0.05 apart (shuffled per row): no two
// experts' scores are within the few ulps the device's exp may differ from the CPU's,
// so the choice is the CPU's exactly; ties are tested separately.
Tensor distinct_logits(int64_t T, int64_t E, uint64_t seed) {
  Tensor t = Tensor::empty({T, E}, DType::Float32);
  std::mt19937_64 rng(seed);
  for (int64_t r = 0; r < T; ++r) {
    std::vector<int64_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t e = 0; e < E; ++e) {
      t.data<float>()[r * E + e] = static_cast<float>(0.05 * static_cast<double>(order[e] - E / 2));
    }
  }
  return t;
}

// Weights: the device sums the E exps in float32 where the CPU uses float64 (E ulp),
// its exp is within 3 + 2|x| ulp (|x| <= 0.05 E here, so at most E / 10 + 3), division
// 2.5 ulp, the k-way renormalising sum and the scaling a few more.
double route_rtol(int64_t E, int64_t k) { return (E + 0.1 * E + 3 + 2.5 + k + 4) * kEps32; }

void check_route(const Tensor& logits, int64_t k, MoeScoring scoring, bool renormalize,
                 const std::optional<Tensor>& bias, double scaling, double eps) {
  const int64_t E = logits.size(1);
  const MoeRouting want = moe_route(logits, k, scoring, renormalize, bias, scaling, eps);
  std::optional<Tensor> device_bias;
  if (bias) device_bias = bias->to(kVulkan);
  const MoeRouting got = moe_route(logits.to(kVulkan), k, scoring, renormalize, device_bias, scaling, eps);
  expect_same_bits(got.ids, want.ids);
  expect_close(got.weights, want.weights, route_rtol(E, k), 0);
}

TEST_F(VulkanMoe, RoutingMatchesCpu) {
  for (int64_t E : {1, 7, 64, 129, 300}) {
    for (int64_t k : {1, 2, 8}) {
      if (k > E) continue;
      for (MoeScoring scoring : {MoeScoring::Softmax, MoeScoring::Sigmoid}) {
        for (bool renormalize : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "E=" << E << " k=" << k << " sigmoid="
                                            << (scoring == MoeScoring::Sigmoid) << " renormalize=" << renormalize);
          const Tensor logits = distinct_logits(3, E, static_cast<uint64_t>(E * 31 + k));
          check_route(logits, k, scoring, renormalize, std::nullopt, 1.0, 0.0);
          // LFM2's form: a selection bias that changes the choice, eps and a scale.
          const Tensor bias = mul(distinct_logits(1, E, 7).reshape({E}), Scalar(0.3));
          check_route(logits, k, scoring, renormalize, bias, 2.5, 1e-6);
        }
      }
    }
  }
  // bfloat16 logits (converted on the device) and one decode token of Qwen3-30B's shape.
  check_route(distinct_logits(1, 128, 5).to(DType::BFloat16), 8, MoeScoring::Softmax, true, std::nullopt, 1.0, 0.0);
  // All E choices: the full descending order.
  check_route(distinct_logits(2, 33, 6), 33, MoeScoring::Sigmoid, true, std::nullopt, 1.0, 0.0);
}

TEST_F(VulkanMoe, RoutingTiesAndNaNFollowTheCpu) {
  // Equal scores go to the lower id; -0 and +0 tie; a bias that ties two experts too.
  Tensor flat = zeros({2, 9});
  flat.select(0, 1).narrow(0, 4, 3).fill_(Scalar(1.0));
  flat.select(0, 1).select(0, 2).fill_(Scalar(-0.0));
  for (int64_t k : {1, 3, 5, 9}) {
    for (MoeScoring scoring : {MoeScoring::Softmax, MoeScoring::Sigmoid}) {
      check_route(flat, k, scoring, true, std::nullopt, 1.0, 0.0);
      Tensor bias = zeros({9});
      bias.narrow(0, 6, 3).fill_(Scalar(0.25));
      check_route(flat, k, scoring, false, bias, 1.0, 0.0);
    }
  }
  // A NaN logit: softmax makes every score NaN (the first k ids are chosen), sigmoid
  // only that expert's, which ranks first.
  Tensor nan_row = distinct_logits(2, 12, 8);
  nan_row.select(0, 1).select(0, 5).fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
  for (MoeScoring scoring : {MoeScoring::Softmax, MoeScoring::Sigmoid}) {
    const MoeRouting want = moe_route(nan_row, 3, scoring, false);
    const MoeRouting got = moe_route(nan_row.to(kVulkan), 3, scoring, false);
    expect_same_bits(got.ids, want.ids);
    expect_close(got.weights, want.weights, route_rtol(12, 3), 0);
  }
}

// ---- the fused expert block ----

using moe_test::expect_matches;
using moe_test::reference_experts;

// Stacked experts (one tensor per projection, the layout the device kernel binds):
// gate_up [E, 2I, H] and down [E, H, I], optionally views of wider rows, with FP8 scales.
struct Stacked {
  Tensor gate_up, down;
  std::optional<Tensor> gate_up_scale, down_scale;

  MoeExperts experts(Device d) const {
    const auto on = [&](const std::optional<Tensor>& s) { return s ? std::optional<Tensor>(s->to(d)) : std::nullopt; };
    return MoeExperts::from_fused(gate_up.to(d), down.to(d), on(gate_up_scale), on(down_scale));
  }
};

Tensor weight_matrix(const Shape& shape, DType w, bool strided, uint64_t seed) {
  Shape wide = shape;
  if (strided) wide.back() += 5;
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape.back()));
  Tensor m = w == DType::Float8_e4m3fn ? linear_test::random_fp8(wide, seed)
                                       : mul(linear_test::random_tensor(wide, DType::Float32, seed), Scalar(scale)).to(w);
  return strided ? m.narrow(-1, 0, shape.back()) : m;
}

Stacked make_stacked(int64_t E, int64_t H, int64_t I, DType w, bool block_scales, bool strided, uint64_t seed) {
  Stacked s;
  s.gate_up = weight_matrix({E, 2 * I, H}, w, strided, seed);
  s.down = weight_matrix({E, H, I}, w, strided, seed + 1);
  if (w == DType::Float8_e4m3fn) {
    const auto scales = [&](const Shape& shape, uint64_t sd, int64_t cols) {
      return mul(add(abs(linear_test::random_tensor(shape, DType::Float32, sd)), Scalar(0.5)),
                 Scalar(0.01 / std::sqrt(static_cast<double>(cols))));
    };
    if (block_scales) {
      s.gate_up_scale = scales({E, 2 * I / 128, (H + 127) / 128}, seed + 2, H);
      s.down_scale = scales({E, (H + 127) / 128, (I + 127) / 128}, seed + 3, I);
    } else {
      s.gate_up_scale = scales({E, 2 * I}, seed + 2, H);
      s.down_scale = scales({E, H}, seed + 3, I);
    }
  }
  return s;
}

// The CPU suite's case description (moe_test_util.h), run against the device.
void check_experts(const moe_test::Case& c, uint64_t seed) {
  SCOPED_TRACE(moe_test::describe(c));
  const Stacked stacked = make_stacked(c.E, c.H, c.I, c.wdtype, c.block_scales, c.strided, seed);
  const MoeExperts cpu = stacked.experts(kCPU);
  const MoeExperts dev = stacked.experts(kVulkan);
  std::optional<SharedExpert> shared, dev_shared;
  if (c.shared) {
    // Its own tensors and another intermediate size, as Qwen3-Next's shared expert.
    shared = SharedExpert{moe_test::random_expert(c.H, c.I + 3, c.wdtype, c.block_scales, false, seed + 7),
                          linear_test::random_tensor({1, c.H}, DType::BFloat16, seed + 8)};
    const auto on = [](const std::optional<Tensor>& s) {
      return s ? std::optional<Tensor>(s->to(kVulkan)) : std::nullopt;
    };
    const SwigluWeights& w = shared->weights;
    dev_shared = SharedExpert{{w.gate.to(kVulkan), w.up.to(kVulkan), w.down.to(kVulkan), on(w.gate_scale),
                               on(w.up_scale), on(w.down_scale)},
                              shared->gate_weight.to(kVulkan)};
  }
  const Tensor x = linear_test::random_tensor({c.T, c.H}, c.xdtype, seed + 9);
  const Tensor logits = distinct_logits(c.T, c.E, seed + 10);
  const MoeRouting r = moe_route(logits, c.k, MoeScoring::Softmax, true);
  const Tensor want = moe_experts(x, r.weights, r.ids, cpu, shared);
  // The CPU's routing moved up, then routing computed on the device: same ids, so the
  // same experts; weights within route_rtol, far inside the bound below.
  const Tensor got = moe_experts(x.to(kVulkan), r.weights.to(kVulkan), r.ids.to(kVulkan), dev, dev_shared);
  const MoeRouting dr = moe_route(logits.to(kVulkan), c.k, MoeScoring::Softmax, true);
  const Tensor got_routed = moe_experts(x.to(kVulkan), dr.weights, dr.ids, dev, dev_shared);
  ASSERT_EQ(got.device().type, DeviceType::Vulkan);
  ASSERT_EQ(got.dtype(), c.xdtype);
  const int64_t I = c.I + (c.shared ? 3 : 0);
  const moe_test::ExpertReference ref = reference_experts(x, r, cpu, shared);
  expect_matches(want, ref, c.H, I, moe_test::bf16_dot_rounding(c.wdtype));  // the CPU kernel, as its own tests hold it
  expect_matches(got.to(kCPU), ref, c.H, I);
  expect_matches(got_routed.to(kCPU), ref, c.H, I);
}

TEST_F(VulkanMoe, ExpertsMatchCpuForWideWeights) {
  for (DType w : {DType::Float32, DType::BFloat16, DType::Float16}) {
    check_experts({1, 64, 32, 8, 2, w, w}, 1);                     // one decode token
    check_experts({3, 17, 5, 4, 3, w, DType::Float32}, 2);         // odd sizes, rows not a multiple of 4
    check_experts({2, 129, 33, 5, 2, w, w, false, true}, 3);       // shared expert
    check_experts({4, 131, 15, 3, 1, w, DType::BFloat16, false, false, true}, 4);  // strided rows
  }
  check_experts({1, 1, 1, 1, 1, DType::BFloat16, DType::BFloat16}, 5);
  check_experts({5, 300, 7, 16, 4, DType::BFloat16, DType::Float16}, 6);
}

TEST_F(VulkanMoe, ExpertsMatchCpuForFp8Weights) {
  for (DType x : {DType::Float32, DType::BFloat16, DType::Float16}) {
    check_experts({2, 64, 40, 6, 2, DType::Float8_e4m3fn, x}, 10);           // per-row scales
    check_experts({3, 200, 128, 4, 2, DType::Float8_e4m3fn, x, true}, 11);   // 128x128 blocks, partial column block
  }
  check_experts({2, 130, 256, 3, 3, DType::Float8_e4m3fn, DType::BFloat16, true, true}, 12);  // two row blocks
  check_experts({2, 31, 9, 3, 2, DType::Float8_e4m3fn, DType::Float32, false, true, true}, 13);
}

TEST_F(VulkanMoe, ZeroSizesAndNonContiguousInputs) {
  const Stacked stacked = make_stacked(4, 24, 12, DType::BFloat16, false, false, 40);
  const MoeExperts cpu = stacked.experts(kCPU);
  const MoeExperts dev = stacked.experts(kVulkan);
  // No tokens; no choices (nothing added: zeros).
  const MoeRouting none = moe_route(zeros({0, 4}).to(kVulkan), 2, MoeScoring::Softmax, true);
  EXPECT_EQ(none.ids.sizes(), (Shape{0, 2}));
  EXPECT_EQ(none.ids.device().type, DeviceType::Vulkan);
  EXPECT_EQ(moe_experts(zeros({0, 24}).to(kVulkan), none.weights, none.ids, dev).sizes(), (Shape{0, 24}));
  const Tensor no_choice = moe_experts(ones({2, 24}).to(kVulkan), zeros({2, 0}).to(kVulkan),
                                       zeros({2, 0}, DType::Int32).to(kVulkan), dev);
  expect_close(no_choice, zeros({2, 24}), 0, 0);
  // x, logits and routing weights as transposed views of device tensors.
  const Tensor xt = linear_test::random_tensor({24, 3}, DType::Float32, 41);
  const Tensor lt = distinct_logits(4, 3, 42);
  const MoeRouting want_r = moe_route(lt.t(), 2, MoeScoring::Sigmoid, true);
  const MoeRouting got_r = moe_route(lt.to(kVulkan).t(), 2, MoeScoring::Sigmoid, true);
  expect_same_bits(got_r.ids, want_r.ids);
  const Tensor want = moe_experts(xt.t(), want_r.weights, want_r.ids, cpu);
  const Tensor got = moe_experts(xt.to(kVulkan).t(), got_r.weights.t().contiguous().t(), got_r.ids, dev);
  expect_matches(got.to(kCPU), reference_experts(xt.t(), want_r, cpu, std::nullopt), 24, 12);
  expect_close(got, want, 1e-5, 1e-6);
}

TEST_F(VulkanMoe, DecodeStepRecordsWithoutWaiting) {
  const Stacked stacked = make_stacked(16, 96, 40, DType::BFloat16, false, false, 20);
  const MoeExperts dev = stacked.experts(kVulkan);
  const Tensor x = linear_test::random_tensor({1, 96}, DType::BFloat16, 21).to(kVulkan);
  const Tensor logits = distinct_logits(1, 16, 22).to(kVulkan);
  vulkan_synchronize();
  const VulkanQueueStats before = vulkan_queue_stats();
  const MoeRouting r = moe_route(logits, 4, MoeScoring::Softmax, true);
  const Tensor y = moe_experts(x, r.weights, r.ids, dev);
  EXPECT_EQ(vulkan_queue_stats().waits, before.waits) << "routing and experts must not wait for the device";
  EXPECT_EQ(y.sizes(), (Shape{1, 96}));
}

TEST_F(VulkanMoe, BadRoutingAndLayoutsAreClearErrors) {
  const Stacked stacked = make_stacked(2, 8, 4, DType::Float32, false, false, 30);
  const MoeExperts dev = stacked.experts(kVulkan);
  const Tensor x = ones({2, 8}).to(kVulkan);
  const Tensor w = ones({2, 1}).to(kVulkan);
  // An id the device cannot check without a wait poisons that token's row with NaN.
  Tensor ids = zeros({2, 1}, DType::Int32);
  ids.data<int32_t>()[1] = 2;
  const Tensor y = moe_experts(x, w, ids.to(kVulkan), dev).to(kCPU);
  EXPECT_FALSE(std::isnan(y.data<float>()[0]));
  for (int64_t h = 0; h < 8; ++h) EXPECT_TRUE(std::isnan(y.data<float>()[8 + h])) << h;
  expect_error([&] { moe_experts(x, w, zeros({2, 1}, DType::Int64).to(kVulkan), dev); }, ErrorKind::Type,
               "must be int32");
  expect_error([&] { moe_experts(x, w, zeros({2, 1}, DType::Int32), dev); }, ErrorKind::Runtime, "same device");
  expect_error([&] { moe_route(ones({2, 4}).to(kVulkan), 1, MoeScoring::Softmax, true, ones({4})); },
               ErrorKind::Runtime, "same device");
  // Experts not at one stride (0, 1, 3 of a stack) cannot be bound as one array.
  const Tensor stack = ones({4, 4, 8}).to(kVulkan);
  const Tensor downs = ones({4, 8, 4}).to(kVulkan);
  MoeExperts uneven;
  for (int64_t e : {0, 1, 3}) uneven.experts.push_back({stack.select(0, e), stack.select(0, e), downs.select(0, e)});
  expect_error([&] { moe_experts(x, w, zeros({2, 1}, DType::Int32).to(kVulkan), uneven); },
               ErrorKind::NotImplemented, "one device tensor at a constant stride");
  // FP8 scales on another device than their weights.
  const Stacked fp8 = make_stacked(2, 8, 4, DType::Float8_e4m3fn, false, false, 31);
  const MoeExperts mixed =
      MoeExperts::from_fused(fp8.gate_up.to(kVulkan), fp8.down.to(kVulkan), fp8.gate_up_scale, fp8.down_scale);
  expect_error([&] { moe_experts(x, w, zeros({2, 1}, DType::Int32).to(kVulkan), mixed); }, ErrorKind::Runtime,
               "same device");
}

}  // namespace
}  // namespace kiln
