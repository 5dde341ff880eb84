// Gated DeltaNet ops (causal_conv1d, gated_delta_gates, gated_delta_rule) against plain
// double-precision references written here from the spec's step-by-step math
// (models.md §2.4), including the per-token recompute the kernel's fused form avoids.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kiln/ops/composite.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/tensor.h"
#include "gated_delta_reference.h"
#include "test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using namespace gated_delta_testing;
double silu(double x) { return x / (1.0 + std::exp(-x)); }

// ------------------------------------------------------------------ causal_conv1d

// u = [state; x]; out[t, c] = act(sum_j w[c, j] u[t + j, c]); new state = u[T .. T+K-2].
struct ConvReference {
  Vec out, state;
  Vec magnitude;  // sum_j |w u| per output, for the rounding bound
};
ConvReference conv_reference(const Vec& x, const Vec& w, const Vec& state, int64_t T, int64_t C, int64_t K, bool act) {
  std::vector<Vec> u;
  for (int64_t r = 0; r < K - 1; ++r) u.emplace_back(state.begin() + r * C, state.begin() + (r + 1) * C);
  for (int64_t t = 0; t < T; ++t) u.emplace_back(x.begin() + t * C, x.begin() + (t + 1) * C);
  ConvReference ref{Vec(T * C), Vec(), Vec(T * C)};
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0.0, mag = 0.0;
      for (int64_t j = 0; j < K; ++j) {
        acc += w[c * K + j] * u[t + j][c];
        mag += std::abs(w[c * K + j] * u[t + j][c]);
      }
      ref.out[t * C + c] = act ? silu(acc) : acc;
      ref.magnitude[t * C + c] = mag;
    }
  }
  for (int64_t r = 0; r < K - 1; ++r) ref.state.insert(ref.state.end(), u[T + r].begin(), u[T + r].end());
  return ref;
}

// float32: the K products and K-1 sums err by at most K u * sum |w u| (plus silu's few
// ulp on the result); bound 4 (K + 2) u (sum |w u| + |result|).
void expect_conv_close(const Tensor& got, const ConvReference& ref, int64_t K, double extra = 0.0) {
  const Vec g = values(got);
  ASSERT_EQ(g.size(), ref.out.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double bound = 4.0 * (K + 2) * kU * (ref.magnitude[i] + std::abs(ref.out[i])) + extra;
    ASSERT_NEAR(g[i], ref.out[i], bound) << "at " << i;
  }
}

TEST(CausalConv1d, MatchesReferenceOverSizes) {
  std::mt19937 rng(1);
  for (int64_t K : {1, 2, 4, 5}) {
    for (int64_t C : {1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 130}) {
      // 1: the channel blocks of a step; more: the token-major prompt (300 tokens split
      // over threads, 2 shorter than the history of K = 4).
      for (int64_t T : {0, 1, 2, 5, 300}) {
        for (bool act : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "K " << K << " C " << C << " T " << T << " silu " << act);
          Tensor x = random_tensor({T, C}, rng, 2.0), w = random_tensor({C, K}, rng);
          Tensor state = random_tensor({K - 1, C}, rng, 2.0);
          const ConvReference ref = conv_reference(values(x), values(w), values(state), T, C, K, act);
          Tensor out = causal_conv1d(x, w, state, act ? "silu" : "none");
          EXPECT_EQ(out.sizes(), (Shape{T, C}));
          EXPECT_EQ(out.dtype(), DType::Float32);
          expect_conv_close(out, ref, K);
          // The state moves exactly (copies, no arithmetic).
          EXPECT_EQ(values(state), ref.state);
        }
      }
    }
  }
}

// A prompt whole, then token by token, equals one call over everything.
TEST(CausalConv1d, PrefillThenStepsEqualsOneCall) {
  std::mt19937 rng(2);
  const int64_t T = 9, C = 33, K = 4;
  Tensor x = random_tensor({T, C}, rng), w = random_tensor({C, 1, K}, rng);  // nn.Conv1d layout
  Tensor whole_state = zeros({K - 1, C});
  Tensor whole = causal_conv1d(x, w, whole_state);
  Tensor state = zeros({K - 1, C});
  std::vector<Vec> rows;
  const Vec first = values(causal_conv1d(x.narrow(0, 0, 2), w, state));  // shorter than the history
  const Vec all = values(whole);
  for (int64_t i = 0; i < 2 * C; ++i) EXPECT_EQ(first[i], all[i]);
  for (int64_t t = 2; t < T; ++t) {
    const Vec step = values(causal_conv1d(x.narrow(0, t, 1), w, state));
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(step[c], all[t * C + c]) << t << "," << c;
  }
  EXPECT_EQ(values(state), values(whole_state));
}

TEST(CausalConv1d, NarrowAndStridedInputs) {
  std::mt19937 rng(3);
  const int64_t T = 6, C = 17, K = 4;
  Tensor xt = random_tensor({C, T}, rng);
  Tensor x = xt.t();  // non-contiguous [T, C]
  Tensor w = random_tensor({C, K}, rng);
  Tensor state = random_tensor({K - 1, C}, rng);
  const ConvReference ref = conv_reference(values(x), values(w), values(state), T, C, K, true);
  expect_conv_close(causal_conv1d(x, w, state), ref, K);

  // bfloat16 x: computed from the bf16 values, the result rounded to bf16 (2^-9 relative).
  Tensor xb = x.to(DType::BFloat16);
  Tensor state2 = random_tensor({K - 1, C}, rng);
  const ConvReference refb = conv_reference(values(xb), values(w), values(state2), T, C, K, true);
  Tensor outb = causal_conv1d(xb, w, state2);
  EXPECT_EQ(outb.dtype(), DType::BFloat16);
  const Vec g = values(outb);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], refb.out[i], std::abs(refb.out[i]) / 256 + 1e-6);
}

TEST(CausalConv1d, BadInputs) {
  Tensor x = zeros({3, 8}), w = zeros({8, 4}), state = zeros({3, 8});
  const ErrorKind V = ErrorKind::Value, T = ErrorKind::Type, R = ErrorKind::Runtime;
  expect_error([&] { Tensor s = zeros({2, 8}); causal_conv1d(x, w, s); }, R, "expected conv_state of shape [3, 8]");
  expect_error([&] { Tensor s = zeros({3, 8}, DType::BFloat16); causal_conv1d(x, w, s); }, T,
               "expected conv_state of dtype float32");
  expect_error([&] { Tensor s = zeros({8, 3}).t(); causal_conv1d(x, w, s); }, R, "conv_state must be contiguous");
  expect_error([&] { causal_conv1d(x, w, state, "relu"); }, V, "activation must be \"silu\" or \"none\"");
  expect_error([&] { causal_conv1d(zeros({1, 3, 8}), w, state); }, R, "expected x of shape [tokens, channels]");
  expect_error([&] { causal_conv1d(x, zeros({9, 4}), state); }, R, "expected weight of shape [channels, kernel]");
  expect_error([&] { causal_conv1d(zeros({3, 8}, DType::Int32), w, state); }, T, "expected x of dtype float32");
}

// ------------------------------------------------------------------ gated_delta_gates

TEST(GatedDeltaGates, MatchesReference) {
  std::mt19937 rng(4);
  for (int64_t H : {1, 7, 8, 9, 32}) {
    for (int64_t T : {0, 1, 3}) {
      Tensor a = random_tensor({T, H}, rng, 30.0), b = random_tensor({T, H}, rng, 10.0);  // softplus's both branches
      Tensor A_log = random_tensor({H}, rng, 3.0), dt = random_tensor({H}, rng, 2.0);
      DeltaGates gates = gated_delta_gates(a, b, A_log, dt);
      ASSERT_EQ(gates.g.sizes(), (Shape{T, H}));
      const Vec av = values(a), bv = values(b), lv = values(A_log), dv = values(dt);
      const Vec g = values(gates.g), beta = values(gates.beta);
      for (int64_t i = 0; i < T * H; ++i) {
        const double x = av[i] + dv[i % H];
        const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
        const double want_g = -std::exp(lv[i % H]) * sp;
        const double want_beta = 1.0 / (1.0 + std::exp(-bv[i]));
        // a few float32 roundings (the sum, exp, log1p, product): 8 u relative, and the
        // sum's rounding (u |a + dt_bias|) moves softplus by at most that much.
        EXPECT_NEAR(g[i], want_g, 8 * kU * std::abs(want_g) + std::exp(lv[i % H]) * kU * std::abs(x) * 2);
        EXPECT_NEAR(beta[i], want_beta, 8 * kU);
      }
    }
  }
  // Leading dims of any shape; bfloat16 inputs.
  Tensor a = random_tensor({2, 3, 4}, rng).to(DType::BFloat16);
  EXPECT_EQ(gated_delta_gates(a, a, zeros({4}), zeros({4})).g.sizes(), (Shape{2, 3, 4}));
  expect_error([&] { gated_delta_gates(zeros({2, 4}), zeros({2, 5}), zeros({4}), zeros({4})); }, ErrorKind::Runtime,
               "expected a and b of one shape");
  expect_error([&] { gated_delta_gates(zeros({2, 4}), zeros({2, 4}), zeros({5}), zeros({4})); }, ErrorKind::Runtime,
               "expected A_log and dt_bias of shape [4]");
}

// ------------------------------------------------------------------ gated_delta_rule


TEST(GatedDeltaRule, MatchesReferenceOverSizes) {
  std::mt19937 rng(5);
  struct Geometry {
    int64_t Hk, Hv, dk, dv;
  };
  for (const Geometry& s : {Geometry{1, 1, 1, 1}, Geometry{1, 1, 7, 9}, Geometry{2, 4, 16, 8},
                            Geometry{2, 2, 17, 33}, Geometry{1, 3, 8, 16}, Geometry{4, 8, 32, 32}}) {
    for (int64_t T : {0, 1, 3, 9}) {
      for (bool l2 : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "Hk " << s.Hk << " Hv " << s.Hv << " dk " << s.dk << " dv " << s.dv
                                          << " T " << T << " l2 " << l2);
        RuleInputs in = rule_inputs(T, s.Hk, s.Hv, s.dk, s.dv, rng);
        // Without the norm, unit-scale q and k grow the state; keep them small then.
        if (!l2) {
          in.q = mul(in.q, Scalar(1.0 / s.dk));
          in.k = mul(in.k, Scalar(1.0 / s.dk));
        }
        const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
        const RuleReference ref = rule_reference(values(in.q), values(in.k), values(in.v), values(in.g),
                                                 values(in.beta), values(in.state), T, s.Hk, s.Hv, s.dk, s.dv, l2,
                                                 scale);
        Tensor out = gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, in.state, l2);
        EXPECT_EQ(out.sizes(), (Shape{T, s.Hv, s.dv}));
        expect_rule_close(out, in.state, ref, T, s.dk, s.dv);
      }
    }
  }
}

// Prefill then decode equals one pass; a custom scale; bfloat16 and strided inputs.
TEST(GatedDeltaRule, StateCarriesAcrossCalls) {
  std::mt19937 rng(6);
  const int64_t T = 7, Hk = 2, Hv = 4, dk = 16, dv = 8;
  RuleInputs in = rule_inputs(T, Hk, Hv, dk, dv, rng);
  Tensor whole_state = in.state.clone();
  const Vec whole = values(gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, whole_state, true, 0.3));
  Tensor state = in.state.clone();
  Vec pieces = values(gated_delta_rule(in.q.narrow(0, 0, 4), in.k.narrow(0, 0, 4), in.v.narrow(0, 0, 4),
                                       in.g.narrow(0, 0, 4), in.beta.narrow(0, 0, 4), state, true, 0.3));
  for (int64_t t = 4; t < T; ++t) {
    const Vec step = values(gated_delta_rule(in.q.narrow(0, t, 1), in.k.narrow(0, t, 1), in.v.narrow(0, t, 1),
                                             in.g.narrow(0, t, 1), in.beta.narrow(0, t, 1), state, true, 0.3));
    pieces.insert(pieces.end(), step.begin(), step.end());
  }
  EXPECT_EQ(pieces, whole);  // the same float operations in the same order
  EXPECT_EQ(values(state), values(whole_state));

  // bfloat16 q/k/v are used as their values; a transposed (strided) v gives the same.
  Tensor vt = in.v.transpose(1, 2).contiguous().transpose(1, 2);
  Tensor s1 = in.state.clone(), s2 = in.state.clone();
  EXPECT_EQ(values(gated_delta_rule(in.q, in.k, vt, in.g, in.beta, s1)),
            values(gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, s2)));
  Tensor qb = in.q.to(DType::BFloat16);
  Tensor s3 = in.state.clone(), s4 = in.state.clone();
  EXPECT_EQ(values(gated_delta_rule(qb, in.k, in.v, in.g, in.beta, s3)),
            values(gated_delta_rule(qb.to(DType::Float32), in.k, in.v, in.g, in.beta, s4)));
}

TEST(GatedDeltaRule, BadInputs) {
  const ErrorKind R = ErrorKind::Runtime, T = ErrorKind::Type, V = ErrorKind::Value;
  Tensor q = zeros({2, 2, 4}), v = zeros({2, 4, 3}), g = zeros({2, 4}), state = zeros({4, 4, 3});
  expect_error([&] { gated_delta_rule(q, q, zeros({2, 3, 3}), zeros({2, 3}), zeros({2, 3}), state); }, R,
               "value heads (3) must be a multiple of key heads (2)");
  expect_error([&] { gated_delta_rule(q, q, v, zeros({2, 3}), g, state); }, R, "expected g and beta of shape [2, 4]");
  expect_error([&] { Tensor s = zeros({4, 3, 4}); gated_delta_rule(q, q, v, g, g, s); }, R,
               "expected state of shape [4, 4, 3]");
  expect_error([&] { Tensor s = zeros({4, 4, 3}, DType::BFloat16); gated_delta_rule(q, q, v, g, g, s); }, T,
               "expected state of dtype float32");
  expect_error([&] { gated_delta_rule(q, zeros({2, 2, 5}), v, g, g, state); }, R, "expected q and k of one shape");
  expect_error([&] { gated_delta_rule(zeros({2, 2, 4}, DType::Int64), q, v, g, g, state); }, T,
               "expected q of dtype float32");
  expect_error([&] { gated_delta_rule(q, q, v, g, g, state, true, INFINITY); }, V, "scale must be finite");
}

// ------------------------------------------------------------------ composites

// The fused kernels against their unfused composites (kiln::composite), states included.
// Same bounds as against the float64 references: both sides are float32.
TEST(GatedDeltaComposite, FusedMatchesComposite) {
  std::mt19937 rng(8);
  for (int64_t T : {0, 1, 6}) {
    SCOPED_TRACE(::testing::Message() << "T " << T);
    const int64_t C = 37, K = 4;
    Tensor x = random_tensor({T, C}, rng), w = random_tensor({C, 1, K}, rng);
    Tensor s1 = random_tensor({K - 1, C}, rng), s2 = s1.clone();
    const Vec fused = values(causal_conv1d(x, w, s1)), unfused = values(composite::causal_conv1d(x, w, s2));
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_NEAR(fused[i], unfused[i], 4 * (K + 2) * kU * 8);
    EXPECT_EQ(values(s1), values(s2));

    Tensor a = random_tensor({T, 4}, rng, 5.0), b = random_tensor({T, 4}, rng, 5.0);
    Tensor A_log = random_tensor({4}, rng), dt = random_tensor({4}, rng);
    const DeltaGates gf = gated_delta_gates(a, b, A_log, dt), gu = composite::gated_delta_gates(a, b, A_log, dt);
    const Vec g1 = values(gf.g), g2 = values(gu.g), b1 = values(gf.beta), b2 = values(gu.beta);
    for (size_t i = 0; i < g1.size(); ++i) {
      EXPECT_NEAR(g1[i], g2[i], 16 * kU * (1 + std::abs(g2[i])));
      EXPECT_NEAR(b1[i], b2[i], 8 * kU);
    }

    const int64_t Hk = 2, Hv = 4, dk = 16, dv = 8;
    RuleInputs in = rule_inputs(T, Hk, Hv, dk, dv, rng);
    Tensor st1 = in.state.clone(), st2 = in.state.clone();
    const RuleReference ref = rule_reference(values(in.q), values(in.k), values(in.v), values(in.g), values(in.beta),
                                             values(in.state), T, Hk, Hv, dk, dv, true, 1.0 / std::sqrt(16.0));
    Tensor fused_out = gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, st1);
    Tensor unfused_out = composite::gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, st2);
    EXPECT_EQ(unfused_out.sizes(), fused_out.sizes());
    expect_rule_close(fused_out, st1, ref, T, dk, dv);
    expect_rule_close(unfused_out, st2, ref, T, dk, dv);
  }
}

}  // namespace
}  // namespace kiln
