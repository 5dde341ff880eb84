// The decode step of the Gated DeltaNet layer:
//   - delta_rule_step (one head and token of the recurrent rule, Highway code) on every
//     SIMD target, and its plain-loop twin, against a float64 reference: key and value
//     dims around every lane count and column block, empty dims;
//   - delta_net_decode_out (the conv, gates, rule and gated norm in one region) against
//     the chain of unfused ops it replaces, bit for bit, over several tokens, several
//     geometries (channel ranges off the conv's 64-channel blocks), thread counts, and
//     views into a wider row (Qwen3-Next's qkv and z share one buffer); bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/gated_delta/delta_rule_step.h"
#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/ops/nn.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"
#include "gated_delta_reference.h"
#include "simd_targets.h"
#include "test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using namespace gated_delta_testing;

// ------------------------------------------------------------------ delta_rule_step

std::vector<float> uniform(int64_t n, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

using StepFn = void (*)(const float*, const float*, float, const float*, float, float, float*, int64_t, int64_t,
                        float*);

// One step against float64, with bounds derived from the sums: S^T k and S^T q are dk
// products summed (at most two roundings per term: 2 (dk + 4) u of sum |S k| = E of its
// magnitude), delta and the output add a few roundings each (folded into the factor 2).
void check_step(StepFn step, int64_t dk, int64_t dv, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << "dk " << dk << " dv " << dv);
  const float inv = dk > 0 ? 1.0f / std::sqrt(static_cast<float>(dk)) : 1.0f;
  const std::vector<float> q = uniform(dk, rng, inv), k = uniform(dk, rng, inv), v = uniform(dv, rng, 1.0f);
  const std::vector<float> S0 = uniform(dk * dv, rng, 1.0f);
  float kq = 0.0f;
  for (int64_t r = 0; r < dk; ++r) kq += k[r] * q[r];
  const float decay = 0.9f, beta = 0.6f;
  std::vector<float> S = S0, out(static_cast<size_t>(dv), -1.0f);
  step(q.data(), k.data(), kq, v.data(), decay, beta, S.data(), dk, dv, out.data());
  const double E = 2.0 * static_cast<double>(dk + 4) * kU;
  for (int64_t c = 0; c < dv; ++c) {
    double sk = 0, sq = 0, mk = 0, mq = 0;
    for (int64_t r = 0; r < dk; ++r) {
      sk += static_cast<double>(S0[r * dv + c]) * k[r];
      sq += static_cast<double>(S0[r * dv + c]) * q[r];
      mk += std::abs(static_cast<double>(S0[r * dv + c]) * k[r]);
      mq += std::abs(static_cast<double>(S0[r * dv + c]) * q[r]);
    }
    const double delta = beta * (v[c] - decay * sk);
    const double want = decay * sq + static_cast<double>(kq) * delta;
    // S^T k errs by at most E/2 of mk; the subtraction and the product by beta round once each.
    const double delta_bound = beta * (E + 4 * kU) * (std::abs(v[c]) + decay * mk);
    const double out_bound = 2 * E * (decay * mq + std::abs(kq) * beta * (std::abs(v[c]) + decay * mk)) + 1e-30;
    ASSERT_NEAR(out[c], want, out_bound) << "out " << c;
    for (int64_t r = 0; r < dk; ++r) {
      const double s = decay * S0[r * dv + c] + static_cast<double>(k[r]) * delta;
      const double bound = 4 * kU * (decay * std::abs(S0[r * dv + c]) + std::abs(k[r] * delta)) +
                           std::abs(k[r]) * delta_bound + 1e-30;
      ASSERT_NEAR(S[r * dv + c], s, bound) << "state " << r << ", " << c;
    }
  }
}

TEST(DeltaRuleStep, MatchesFloat64OnEveryTarget) {
  simd_targets::for_each(cpu::delta_rule_step_simd_targets(), [] {
    std::mt19937 rng(31);
    for (int64_t dk : {0, 1, 7, 17, 128}) {
      for (int64_t dv : {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 96, 127, 128, 129, 200}) {
        check_step(&cpu::delta_rule_step, dk, dv, rng);
      }
    }
  });
}

TEST(DeltaRuleStep, ScalarTwinMatchesFloat64) {
  std::mt19937 rng(32);
  for (int64_t dk : {0, 1, 17, 128}) {
    for (int64_t dv : {0, 1, 17, 128}) check_step(&cpu::delta_rule_step_scalar, dk, dv, rng);
  }
}

// ------------------------------------------------------------------ delta_net_decode_out

struct Geometry {
  int64_t hk, hv, dk, dv, kernel;
};

struct Layer {
  DeltaNetDecodeWeights weights;
  Tensor conv_state, state;
};

Layer random_layer(const Geometry& g, std::mt19937& rng) {
  const int64_t channels = 2 * g.hk * g.dk + g.hv * g.dv;
  Layer l;
  l.weights.conv_weight = random_tensor({channels, 1, g.kernel}, rng);
  l.weights.A_log = random_tensor({g.hv}, rng, 1.0);
  l.weights.dt_bias = random_tensor({g.hv}, rng, 1.0);
  l.weights.norm_weight = random_tensor({g.dv}, rng, 1.0);
  l.weights.norm_eps = 1e-6;
  l.weights.key_heads = g.hk;
  l.conv_state = random_tensor({g.kernel - 1, channels}, rng);
  l.state = random_tensor({g.hv, g.dk, g.dv}, rng, 0.5);
  return l;
}

// The unfused decode token (DeltaNetBlock::forward for T = 1).
Tensor unfused(const Geometry& g, const Tensor& qkv, const Tensor& z, const Tensor& a, const Tensor& b, Layer& l) {
  const int64_t kd = g.hk * g.dk;
  const Tensor mixed = causal_conv1d(qkv, l.weights.conv_weight, l.conv_state, "silu");
  const Tensor q = mixed.narrow(1, 0, kd).reshape({1, g.hk, g.dk});
  const Tensor k = mixed.narrow(1, kd, kd).reshape({1, g.hk, g.dk});
  const Tensor v = mixed.narrow(1, 2 * kd, g.hv * g.dv).reshape({1, g.hv, g.dv});
  const DeltaGates gates = gated_delta_gates(a, b, l.weights.A_log, l.weights.dt_bias);
  const Tensor o = gated_delta_rule(q, k, v, gates.g, gates.beta, l.state, true);
  return rms_norm_gated(o, z, l.weights.norm_weight, l.weights.norm_eps);
}

void expect_same_bits(const Tensor& x, const Tensor& y, const char* what) {
  ASSERT_EQ(x.sizes(), y.sizes()) << what;
  if (x.numel() == 0) return;  // an empty tensor's data may be null (memcmp's arguments must not be)
  const Tensor cx = x.contiguous(), cy = y.contiguous();
  EXPECT_EQ(std::memcmp(cx.data<float>(), cy.data<float>(), static_cast<size_t>(cx.numel()) * sizeof(float)), 0)
      << what;
}

TEST(DeltaNetDecode, BitIdenticalToTheUnfusedOpsOverTokens) {
  std::mt19937 rng(41);
  for (const Geometry& g : {Geometry{1, 1, 1, 1, 1}, Geometry{1, 1, 7, 9, 4}, Geometry{2, 4, 16, 8, 4},
                            Geometry{2, 2, 17, 33, 2}, Geometry{1, 3, 8, 16, 4}, Geometry{3, 3, 20, 65, 3},
                            Geometry{4, 8, 32, 32, 4}, Geometry{2, 4, 128, 128, 4}}) {
    SCOPED_TRACE(::testing::Message() << "Hk " << g.hk << " Hv " << g.hv << " dk " << g.dk << " dv " << g.dv
                                      << " K " << g.kernel);
    const int64_t channels = 2 * g.hk * g.dk + g.hv * g.dv;
    Layer fused = random_layer(g, rng);
    Layer chain{fused.weights, fused.conv_state.clone(), fused.state.clone()};
    Tensor out = Tensor::empty({1, g.hv, g.dv}, DType::Float32);
    for (int token = 0; token < 3; ++token) {
      const Tensor qkv = random_tensor({1, channels}, rng, 2.0), z = random_tensor({1, g.hv, g.dv}, rng, 2.0);
      const Tensor a = random_tensor({1, g.hv}, rng, 3.0), b = random_tensor({1, g.hv}, rng, 3.0);
      const Tensor want = unfused(g, qkv, z, a, b, chain);
      delta_net_decode_out(out, qkv, z, a, b, fused.weights, fused.conv_state, fused.state);
      expect_same_bits(out, want, "out");
      expect_same_bits(fused.conv_state, chain.conv_state, "conv_state");
      expect_same_bits(fused.state, chain.state, "state");
    }
  }
}

// One piece per key head, computed whole by one thread: the thread count changes nothing.
TEST(DeltaNetDecode, ThreadCountDoesNotMatter) {
  std::mt19937 rng(42);
  const Geometry g{5, 10, 16, 24, 4};
  const int64_t channels = 2 * g.hk * g.dk + g.hv * g.dv;
  const Layer start = random_layer(g, rng);
  const Tensor qkv = random_tensor({1, channels}, rng, 2.0), z = random_tensor({1, g.hv, g.dv}, rng, 2.0);
  const Tensor a = random_tensor({1, g.hv}, rng, 3.0), b = random_tensor({1, g.hv}, rng, 3.0);
  std::vector<Tensor> outs, states;
  for (int threads : {1, 2, 3, 4, 7}) {
    ContextScope scope{ExecutionContext(std::make_shared<ThreadPool>(threads))};
    Tensor conv_state = start.conv_state.clone(), state = start.state.clone();
    Tensor out = Tensor::empty({1, g.hv, g.dv}, DType::Float32);
    delta_net_decode_out(out, qkv, z, a, b, start.weights, conv_state, state);
    outs.push_back(out);
    states.push_back(state);
  }
  for (size_t i = 1; i < outs.size(); ++i) {
    expect_same_bits(outs[i], outs[0], "out");
    expect_same_bits(states[i], states[0], "state");
  }
}

// Qwen3-Next's step hands over qkv and z as views into one row [qkv | z] (contiguous,
// with an offset); the conv weight in the [C, K] layout.
TEST(DeltaNetDecode, ViewsIntoAWiderRow) {
  std::mt19937 rng(43);
  const Geometry g{2, 4, 16, 8, 4};
  const int64_t channels = 2 * g.hk * g.dk + g.hv * g.dv, vd = g.hv * g.dv;
  Layer fused = random_layer(g, rng);
  fused.weights.conv_weight = fused.weights.conv_weight.reshape({channels, g.kernel});
  Layer chain{fused.weights, fused.conv_state.clone(), fused.state.clone()};
  const Tensor row = random_tensor({1, channels + vd}, rng, 2.0);
  const Tensor qkv = row.narrow(1, 0, channels), z = row.narrow(1, channels, vd).reshape({1, g.hv, g.dv});
  const Tensor a = random_tensor({1, g.hv}, rng), b = random_tensor({1, g.hv}, rng);
  Tensor out = Tensor::empty({1, g.hv, g.dv}, DType::Float32);
  delta_net_decode_out(out, qkv, z, a, b, fused.weights, fused.conv_state, fused.state);
  expect_same_bits(out, unfused(g, qkv.contiguous(), z.contiguous(), a, b, chain), "out");
  expect_same_bits(fused.state, chain.state, "state");
}

TEST(DeltaNetDecode, BadInputs) {
  std::mt19937 rng(44);
  const Geometry g{2, 4, 8, 8, 4};
  const int64_t channels = 2 * g.hk * g.dk + g.hv * g.dv;
  Layer l = random_layer(g, rng);
  const Tensor qkv = random_tensor({1, channels}, rng), z = random_tensor({1, g.hv, g.dv}, rng);
  const Tensor a = random_tensor({1, g.hv}, rng), b = random_tensor({1, g.hv}, rng);
  Tensor out = Tensor::empty({1, g.hv, g.dv}, DType::Float32);
  const ErrorKind R = ErrorKind::Runtime, T = ErrorKind::Type, V = ErrorKind::Value;
  const auto call = [&](const Tensor& o, const Tensor& x, const Tensor& zz, const DeltaNetDecodeWeights& w, Tensor& cs,
                        Tensor& s) { delta_net_decode_out(o, x, zz, a, b, w, cs, s); };
  expect_error([&] { call(out, qkv.to(DType::BFloat16), z, l.weights, l.conv_state, l.state); }, T,
               "expected qkv of dtype float32");
  expect_error([&] { call(out, random_tensor({1, channels + 1}, rng), z, l.weights, l.conv_state, l.state); }, R,
               "expected qkv of shape");
  expect_error([&] { call(out, qkv, random_tensor({1, g.dv, g.hv}, rng).transpose(1, 2), l.weights, l.conv_state,
                          l.state); },
               R, "z must be contiguous");
  DeltaNetDecodeWeights w = l.weights;
  w.key_heads = 3;
  expect_error([&] { call(out, qkv, z, w, l.conv_state, l.state); }, V, "key_heads must be positive");
  w.key_heads = 0;
  expect_error([&] { call(out, qkv, z, w, l.conv_state, l.state); }, V, "key_heads must be positive");
  w = l.weights;
  w.norm_eps = NAN;
  expect_error([&] { call(out, qkv, z, w, l.conv_state, l.state); }, V, "norm_eps must be finite");
  w = l.weights;
  w.norm_weight = random_tensor({g.dv + 1}, rng);
  expect_error([&] { call(out, qkv, z, w, l.conv_state, l.state); }, R, "expected norm_weight of shape");
  w = l.weights;
  w.conv_weight = random_tensor({channels, 2, 4}, rng);
  expect_error([&] { call(out, qkv, z, w, l.conv_state, l.state); }, R, "expected conv_weight of shape");
  {
    Tensor cs = random_tensor({2, channels}, rng);
    expect_error([&] { call(out, qkv, z, l.weights, cs, l.state); }, R, "expected conv_state of shape");
  }
  {
    Tensor s = zeros({g.hv, g.dk, g.dv}, DType::BFloat16);
    expect_error([&] { call(out, qkv, z, l.weights, l.conv_state, s); }, T, "expected state of dtype float32");
    Tensor empty_state = zeros({g.hv, 0, g.dv});
    expect_error([&] { call(out, qkv, z, l.weights, l.conv_state, empty_state); }, R, "non-empty state");
    Tensor flat = zeros({g.hv, g.dk * g.dv});
    expect_error([&] { call(out, qkv, z, l.weights, l.conv_state, flat); }, R, "expected state of shape");
  }
  // out over the state it would be computed from; out of the wrong shape.
  const Tensor state_before = l.state.clone(), conv_before = l.conv_state.clone();
  Tensor state_row = l.state.view({g.hv * g.dk * g.dv}).narrow(0, 0, g.hv * g.dv).view({1, g.hv, g.dv});
  expect_error([&] { call(state_row, qkv, z, l.weights, l.conv_state, l.state); }, R, "refer to a single memory");
  Tensor wrong_out = Tensor::empty({1, g.hv, g.dv + 1}, DType::Float32);
  expect_error([&] { call(wrong_out, qkv, z, l.weights, l.conv_state, l.state); }, R, "out must have shape");
  // A refused call writes nothing.
  expect_same_bits(l.state, state_before, "state");
  expect_same_bits(l.conv_state, conv_before, "conv_state");
}

}  // namespace
}  // namespace kiln
