// moe_route, moe_permute and moe_experts against plain float64 references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/moe/moe_kernels.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/moe.h"
#include "linear_test_util.h"
#include "moe_test_util.h"
#include "simd_targets.h"
#include "test_util.h"

namespace {

using namespace kiln;
using kiln::testing::expect_error;
using linear_test::random_fp8;
using linear_test::random_tensor;
using linear_test::values;

// A 1-D tensor holding `v`.
template <typename T>
Tensor from_values(const std::vector<T>& v, DType dt) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, dt);
  std::copy(v.begin(), v.end(), t.data<T>());
  return t;
}

// ---- routing ----

struct RouteReference {
  std::vector<int64_t> ids;
  std::vector<double> weights;
};

RouteReference reference_route(const std::vector<double>& logits, int64_t T, int64_t E, int64_t k, bool sigmoid,
                               const std::vector<double>& bias, bool renormalize, double eps, double scaling) {
  RouteReference r;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> s(static_cast<size_t>(E));
    const double* l = logits.data() + t * E;
    if (sigmoid) {
      for (int64_t e = 0; e < E; ++e) s[e] = 1.0 / (1.0 + std::exp(-l[e]));
    } else {
      const double m = *std::max_element(l, l + E);
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += std::exp(l[e] - m);
      for (int64_t e = 0; e < E; ++e) s[e] = std::exp(l[e] - m) / sum;
    }
    std::vector<int64_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    const auto sel = [&](int64_t e) { return s[e] + (bias.empty() ? 0.0 : bias[e]); };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return sel(a) > sel(b); });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += s[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      r.ids.push_back(order[j]);
      r.weights.push_back((renormalize ? s[order[j]] / (sum + eps) : s[order[j]]) * scaling);
    }
  }
  return r;
}

void check_route(int64_t T, int64_t E, int64_t k, MoeScoring scoring, bool with_bias, bool renormalize, double eps,
                 double scaling, DType dt, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "T=" << T << " E=" << E << " k=" << k << " dtype=" << dtype_name(dt));
  const Tensor logits = random_tensor({T, E}, dt, seed);
  std::optional<Tensor> bias;
  if (with_bias) bias = mul(random_tensor({E}, DType::Float32, seed + 1), Scalar(0.1));
  const MoeRouting r = moe_route(logits, k, scoring, renormalize, bias, scaling, eps);
  ASSERT_EQ(r.weights.sizes(), (Shape{T, k}));
  ASSERT_EQ(r.ids.dtype(), DType::Int32);
  const RouteReference ref = reference_route(values(logits), T, E, k, scoring == MoeScoring::Sigmoid,
                                             with_bias ? values(*bias) : std::vector<double>{}, renormalize, eps,
                                             scaling);
  const std::vector<double> w = values(r.weights), id = values(r.ids);
  for (size_t i = 0; i < ref.ids.size(); ++i) {
    EXPECT_EQ(id[i], ref.ids[i]) << i;
    // float32 exp (a few ulp) and an E-term float sum: E * 2^-24 relative, times 4.
    EXPECT_NEAR(w[i], ref.weights[i], std::fabs(ref.weights[i]) * 4.0 * (E + 8) * 0x1p-24) << i;
  }
}

TEST(MoeRoute, MatchesReference) {
  check_route(5, 128, 8, MoeScoring::Softmax, false, true, 0.0, 1.0, DType::Float32, 1);  // Qwen3-MoE
  check_route(3, 32, 4, MoeScoring::Sigmoid, true, true, 1e-6, 1.0, DType::BFloat16, 2);  // LFM2
  check_route(7, 9, 3, MoeScoring::Softmax, false, false, 0.0, 2.5, DType::Float16, 3);
  check_route(2, 17, 17, MoeScoring::Sigmoid, false, true, 0.0, 1.0, DType::Float32, 4);  // k == E
  check_route(1, 1, 1, MoeScoring::Softmax, false, true, 0.0, 1.0, DType::Float32, 5);
  check_route(0, 8, 2, MoeScoring::Softmax, false, true, 0.0, 1.0, DType::Float32, 6);
  check_route(300, 64, 6, MoeScoring::Softmax, true, true, 0.0, 1.0, DType::Float32, 7);  // multi-threaded
}

TEST(MoeRoute, TiesGoToTheLowerIdAndBiasOnlySelects) {
  // All logits equal: softmax gives 1/4 each, so ids 0 and 1 win the tie.
  const Tensor flat = zeros({1, 4});
  MoeRouting r = moe_route(flat, 2, MoeScoring::Softmax, false);
  EXPECT_EQ(values(r.ids), (std::vector<double>{0, 1}));
  EXPECT_EQ(values(r.weights), (std::vector<double>{0.25, 0.25}));
  // A bias on expert 3 makes it chosen, but its weight stays the unbiased score.
  const Tensor bias = from_values(std::vector<float>{0, 0, 0, 1}, DType::Float32);
  r = moe_route(flat, 2, MoeScoring::Sigmoid, false, bias);
  EXPECT_EQ(values(r.ids), (std::vector<double>{3, 0}));
  EXPECT_EQ(values(r.weights), (std::vector<double>{0.5, 0.5}));
}

TEST(MoeRoute, Errors) {
  const Tensor logits = zeros({2, 4});
  expect_error([&] { moe_route(logits, 5, MoeScoring::Softmax, true); }, ErrorKind::Value, "top_k must be in [1, 4]");
  expect_error([&] { moe_route(logits, 0, MoeScoring::Softmax, true); }, ErrorKind::Value, "top_k");
  expect_error([&] { moe_route(zeros({4}), 1, MoeScoring::Softmax, true); }, ErrorKind::Runtime,
               "[tokens, experts]");
  expect_error([&] { moe_route(zeros({2, 4}, DType::Int64), 1, MoeScoring::Softmax, true); }, ErrorKind::Type,
               "float32, bfloat16 or float16");
  expect_error([&] { moe_route(logits, 1, MoeScoring::Softmax, true, zeros({3})); }, ErrorKind::Runtime,
               "selection_bias must be [4]");
  expect_error([&] { moe_route(logits, 1, MoeScoring::Softmax, true, std::nullopt, 1.0, -1.0); }, ErrorKind::Value,
               "renorm_eps");
}

TEST(MoePermute, SortsSlotsByExpertStably) {
  const Tensor ids = from_values(std::vector<int32_t>{2, 0, 1, 2, 2, 1}, DType::Int32).reshape({3, 2});
  const MoePermutation p = moe_permute(ids, 4);
  EXPECT_EQ(values(p.offs), (std::vector<double>{1, 3, 6, 6}));
  EXPECT_EQ(values(p.slot), (std::vector<double>{1, 2, 5, 0, 3, 4}));
  EXPECT_EQ(values(p.token_index), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  expect_error([&] { moe_permute(ids, 2); }, ErrorKind::Index, "expert id 2 out of range for 2 experts");
  expect_error([&] { moe_permute(zeros({2, 2}), 4); }, ErrorKind::Type, "int32 or int64");
}

// ---- experts ----

using namespace moe_test;

constexpr DType kWide[] = {DType::Float32, DType::BFloat16, DType::Float16};

TEST(MoeExperts, WideWeightsMatchReference) {
  for (DType w : kWide) {
    check_experts({1, 64, 32, 8, 2, w, w}, 1);                   // one decode token
    check_experts({3, 17, 5, 4, 3, w, DType::Float32}, 2);       // tails everywhere
    check_experts({7, 33, 33, 5, 2, w, w, false, true}, 3);      // shared expert
    check_experts({4, 16, 15, 3, 1, w, w, false, false, true}, 4);  // strided weights, transposed x
  }
  check_experts({1, 1, 1, 1, 1, DType::BFloat16, DType::BFloat16}, 5);
  check_experts({40, 96, 48, 16, 4, DType::BFloat16, DType::BFloat16}, 6);  // several threads, shared experts
}

TEST(MoeExperts, Fp8WeightsMatchReference) {
  for (DType x : kWide) {
    check_experts({2, 64, 40, 6, 2, DType::Float8_e4m3fn, x}, 10);
    check_experts({3, 200, 130, 4, 2, DType::Float8_e4m3fn, x, true}, 11);  // partial 128 blocks
  }
  check_experts({5, 130, 128, 5, 3, DType::Float8_e4m3fn, DType::BFloat16, true, true}, 12);
  check_experts({2, 31, 9, 3, 2, DType::Float8_e4m3fn, DType::Float32, false, true, true}, 13);
}

TEST(MoeExperts, EveryTarget) {
  simd_targets::for_each(cpu::moe_simd_targets(), [] {
    for (DType w : kWide) check_experts({3, 70, 37, 5, 2, w, DType::BFloat16, false, true}, 20);
    check_experts({2, 130, 40, 4, 2, DType::Float8_e4m3fn, DType::BFloat16, true}, 21);
    check_experts({2, 65, 40, 4, 2, DType::Float8_e4m3fn, DType::Float32}, 22);
  });
}

TEST(MoeExperts, FusedLayoutEqualsPerExpertTensors) {
  const int64_t E = 3, H = 40, I = 24;
  const Tensor gate_up = random_tensor({E, 2 * I, H}, DType::BFloat16, 30);
  const Tensor down = random_tensor({E, H, I}, DType::BFloat16, 31);
  MoeExperts separate;
  for (int64_t e = 0; e < E; ++e) {
    separate.experts.push_back({gate_up.select(0, e).narrow(0, 0, I).clone(),
                                gate_up.select(0, e).narrow(0, I, I).clone(), down.select(0, e).clone()});
  }
  const Tensor x = random_tensor({4, H}, DType::BFloat16, 32);
  const MoeRouting r = moe_route(random_tensor({4, E}, DType::Float32, 33), 2, MoeScoring::Softmax, true);
  EXPECT_EQ(values(moe_experts(x, r.weights, r.ids, MoeExperts::from_fused(gate_up, down))),
            values(moe_experts(x, r.weights, r.ids, separate)));
  // FP8 with per-row scales [E, 2I] / [E, H].
  const auto [q_gu, s_gu] = quantize_fp8_rowwise(gate_up.reshape({E * 2 * I, H}));
  const auto [q_d, s_d] = quantize_fp8_rowwise(down.reshape({E * H, I}));
  const MoeExperts fp8 = MoeExperts::from_fused(q_gu.reshape({E, 2 * I, H}), q_d.reshape({E, H, I}),
                                                s_gu.reshape({E, 2 * I}), s_d.reshape({E, H}));
  expect_matches(moe_experts(x, r.weights, r.ids, fp8), reference_experts(x, r, fp8, std::nullopt), H, I,
                 bf16_dot_rounding(DType::Float8_e4m3fn));
}

TEST(MoeExperts, ZeroTokensAndZeroChoices) {
  MoeExperts experts;
  experts.experts.push_back(random_expert(8, 4, DType::Float32, false, false, 40));
  const Tensor none = moe_experts(zeros({0, 8}), zeros({0, 2}), zeros({0, 2}, DType::Int32), experts);
  EXPECT_EQ(none.sizes(), (Shape{0, 8}));
  // k = 0 and no shared expert: nothing is added.
  const Tensor out = moe_experts(ones({2, 8}), zeros({2, 0}), zeros({2, 0}, DType::Int32), experts);
  EXPECT_EQ(values(out), std::vector<double>(16, 0.0));
}

TEST(MoeExperts, Errors) {
  MoeExperts experts;
  experts.experts.push_back(random_expert(8, 4, DType::BFloat16, false, false, 50));
  experts.experts.push_back(random_expert(8, 4, DType::BFloat16, false, false, 51));
  const Tensor x = ones({2, 8}, DType::BFloat16);
  const Tensor w = ones({2, 1});
  const Tensor ids = zeros({2, 1}, DType::Int32);
  expect_error([&] { moe_experts(x, w, full({2, 1}, Scalar(2), DType::Int32), experts); }, ErrorKind::Index,
               "expert id 2 out of range for 2 experts");
  expect_error([&] { moe_experts(x, w, ids.to(DType::Float32), experts); }, ErrorKind::Type, "int32 or int64");
  expect_error([&] { moe_experts(x, ones({2, 2}), ids, experts); }, ErrorKind::Runtime, "shape of ids");
  expect_error([&] { moe_experts(ones({2, 8}, DType::Int32), w, ids, experts); }, ErrorKind::Type, "x must be");
  expect_error([&] { moe_experts(ones({2, 9}, DType::BFloat16), w, ids, experts); }, ErrorKind::Runtime,
               "must have shape [4, 9]");
  expect_error([&] { moe_experts(x, w, ids, MoeExperts{}); }, ErrorKind::Runtime, "no experts");
  MoeExperts mixed = experts;
  mixed.experts[1].down = mixed.experts[1].down.to(DType::Float32);
  expect_error([&] { moe_experts(x, w, ids, mixed); }, ErrorKind::Type, "share one dtype");
  MoeExperts fp8;
  fp8.experts.push_back(random_expert(8, 4, DType::Float8_e4m3fn, false, false, 52));
  fp8.experts[0].up_scale.reset();
  expect_error([&] { moe_experts(x, w, ids, fp8); }, ErrorKind::Runtime, "needs its float32 scales");
  fp8.experts[0].up_scale = ones({3});
  expect_error([&] { moe_experts(x, w, ids, fp8); }, ErrorKind::Runtime, "scales must be [4] (per row)");
  MoeExperts scaled = experts;
  scaled.experts[0].gate_scale = ones({4});
  expect_error([&] { moe_experts(x, w, ids, scaled); }, ErrorKind::Runtime, "only for float8_e4m3fn");
  const SharedExpert bad_gate{random_expert(8, 4, DType::BFloat16, false, false, 53), ones({1, 7})};
  expect_error([&] { moe_experts(x, w, ids, experts, bad_gate); }, ErrorKind::Runtime, "gate_weight must be [1, 8]");
  expect_error([&] { MoeExperts::from_fused(ones({2, 5, 8}), ones({2, 8, 2})); }, ErrorKind::Runtime,
               "[experts, 2 * inter, hidden]");
}

}  // namespace
