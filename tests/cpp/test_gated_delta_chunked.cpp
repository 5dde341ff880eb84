// gated_delta_rule_chunked (the chunked WY form for prompts) against the float64
// recurrent reference and against the float32 recurrent kernel, with carried states.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/gated_delta/chunk_gemm.h"
#include "backend/cpu/gated_delta/chunk_rows.h"
#include "gated_delta_reference.h"
#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"
#include "simd_targets.h"
#include "test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using namespace gated_delta_testing;

// The chunked form rounds differently from the recurrent one: per token, S0^T w and S0^T q
// are dot products of length dk, the solve and the intra-chunk sums run over up to C
// earlier tokens, and each chunk's state update sums C outer products. So a token errs
// by about (dk + dv + 2C) u of the outputs' scale, and as in the recurrent bound the
// errors of T tokens add up (the decays keep the state bounded): 4 T (dk + dv + 2C + 8) u.
double chunked_bound(const RuleReference& ref, int64_t T, int64_t dk, int64_t dv, int64_t C) {
  return 4.0 * static_cast<double>(std::max<int64_t>(T, 1)) * static_cast<double>(dk + dv + 2 * C + 8) * kU *
         ref.scale_of_out;
}

void expect_near_all(const Vec& got, const Vec& want, double bound, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], bound) << what << " " << i;
}

struct Geometry {
  int64_t Hk, Hv, dk, dv;
};

// Chunked vs the float64 reference and vs the recurrent kernel, with a random initial
// state, over prompt lengths around the chunk size.
TEST(GatedDeltaRuleChunked, MatchesRecurrentAndReference) {
  std::mt19937 rng(11);
  for (const Geometry& s : {Geometry{1, 1, 1, 1}, Geometry{1, 1, 8, 8}, Geometry{2, 4, 16, 8},
                            Geometry{1, 3, 17, 33}, Geometry{2, 2, 32, 64}}) {
    for (int64_t T : {1, 5, 63, 64, 65, 130, 200}) {
      for (bool l2 : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "Hk " << s.Hk << " Hv " << s.Hv << " dk " << s.dk << " dv " << s.dv
                                          << " T " << T << " l2 " << l2);
        RuleInputs in = rule_inputs(T, s.Hk, s.Hv, s.dk, s.dv, rng);
        if (!l2) {  // unnormalised unit-scale keys would grow the state; keep them small
          in.q = mul(in.q, Scalar(1.0 / s.dk));
          in.k = mul(in.k, Scalar(1.0 / s.dk));
        }
        const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
        const RuleReference ref = rule_reference(values(in.q), values(in.k), values(in.v), values(in.g),
                                                 values(in.beta), values(in.state), T, s.Hk, s.Hv, s.dk, s.dv, l2,
                                                 scale);
        Tensor recurrent_state = in.state.clone();
        const Tensor recurrent = gated_delta_rule(in.q, in.k, in.v, in.g, in.beta, recurrent_state, l2);
        Tensor chunked_state = in.state.clone();
        const Tensor chunked = gated_delta_rule_chunked(in.q, in.k, in.v, in.g, in.beta, chunked_state, l2);
        EXPECT_EQ(chunked.sizes(), (Shape{T, s.Hv, s.dv}));
        EXPECT_EQ(chunked.dtype(), DType::Float32);
        const double bound = chunked_bound(ref, T, s.dk, s.dv, 64);
        expect_near_all(values(chunked), ref.out, bound, "out vs reference");
        expect_near_all(values(chunked_state), ref.state, 4 * bound, "state vs reference");
        // Both float32 forms err against the reference; against each other by the sum.
        const double recurrent_bound = 4.0 * T * (s.dk + s.dv + 8) * kU * ref.scale_of_out;
        expect_near_all(values(chunked), values(recurrent), bound + recurrent_bound, "out vs recurrent");
        expect_near_all(values(chunked_state), values(recurrent_state), 4 * (bound + recurrent_bound),
                        "state vs recurrent");
      }
    }
  }
}

// The head dims the models run (64 and 128, mixed, and 96 x 80: rows whose padded
// workspace strides are not the model ones) at prompt lengths around the chunk, with a
// strided q (every other row of a longer tensor) and a carried state: the shapes whose
// products take the full register tiles, and whose state and right-hand-side rows the
// kernel keeps at padded strides in its workspace.
TEST(GatedDeltaRuleChunked, ModelHeadDimsMatchReference) {
  std::mt19937 rng(18);
  for (const Geometry& s : {Geometry{1, 2, 128, 128}, Geometry{2, 2, 64, 64}, Geometry{1, 1, 64, 128},
                            Geometry{1, 2, 128, 64}, Geometry{1, 1, 96, 80}}) {
    for (int64_t T : {1, 63, 65, 130}) {
      SCOPED_TRACE(::testing::Message() << "Hk " << s.Hk << " Hv " << s.Hv << " dk " << s.dk << " dv " << s.dv
                                        << " T " << T);
      const RuleInputs in = rule_inputs(T, s.Hk, s.Hv, s.dk, s.dv, rng);
      const Tensor q2 = zeros({2 * T, s.Hk, s.dk});
      q2.slice(0, 0, std::nullopt, 2).copy_(in.q);
      const Tensor qs = q2.slice(0, 0, std::nullopt, 2);
      ASSERT_TRUE(T == 1 || !qs.is_contiguous());  // one row is contiguous at any stride
      const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
      const RuleReference ref = rule_reference(values(in.q), values(in.k), values(in.v), values(in.g),
                                               values(in.beta), values(in.state), T, s.Hk, s.Hv, s.dk, s.dv, true,
                                               scale);
      Tensor state = in.state.clone();
      const Tensor out = gated_delta_rule_chunked(qs, in.k, in.v, in.g, in.beta, state);
      const double bound = chunked_bound(ref, T, s.dk, s.dv, 64);
      expect_near_all(values(out), ref.out, bound, "out vs reference");
      expect_near_all(values(state), ref.state, 4 * bound, "state vs reference");
    }
  }
}

// Every chunk size gives the same rule, over many chunks carried in order.
TEST(GatedDeltaRuleChunked, ChunkSizesAndManyChunks) {
  std::mt19937 rng(12);
  const int64_t Hk = 1, Hv = 2, dk = 8, dv = 4;
  for (const auto& [T, C] : {std::pair<int64_t, int64_t>{37, 1}, {37, 7}, {37, 16}, {37, 32}, {1100, 8}, {1100, 64}}) {
    SCOPED_TRACE(::testing::Message() << "T " << T << " chunk " << C);
    RuleInputs in = rule_inputs(T, Hk, Hv, dk, dv, rng);
    const RuleReference ref = rule_reference(values(in.q), values(in.k), values(in.v), values(in.g), values(in.beta),
                                             values(in.state), T, Hk, Hv, dk, dv, true, 0.7);
    Tensor state = in.state.clone();
    const Tensor out = gated_delta_rule_chunked(in.q, in.k, in.v, in.g, in.beta, state, true, 0.7, C);
    const double bound = chunked_bound(ref, T, dk, dv, C);
    expect_near_all(values(out), ref.out, bound, "out");
    expect_near_all(values(state), ref.state, 4 * bound, "state");
  }
}

// A chunked prompt in two calls, then recurrent decode steps, equals one recurrent pass:
// the state carried between the forms is the same state.
TEST(GatedDeltaRuleChunked, PrefillThenDecodeCarriesState) {
  std::mt19937 rng(13);
  const int64_t T = 140, Hk = 2, Hv = 4, dk = 16, dv = 8;
  RuleInputs in = rule_inputs(T, Hk, Hv, dk, dv, rng);
  const RuleReference ref = rule_reference(values(in.q), values(in.k), values(in.v), values(in.g), values(in.beta),
                                           values(in.state), T, Hk, Hv, dk, dv, true, 1.0 / 4.0);
  const auto part = [&](const Tensor& t, int64_t start, int64_t length) { return t.narrow(0, start, length); };
  Tensor state = in.state.clone();
  Vec out;
  for (const auto& [start, length] : {std::pair<int64_t, int64_t>{0, 70}, {70, 65}}) {
    const Vec piece = values(gated_delta_rule_chunked(part(in.q, start, length), part(in.k, start, length),
                                                      part(in.v, start, length), part(in.g, start, length),
                                                      part(in.beta, start, length), state));
    out.insert(out.end(), piece.begin(), piece.end());
  }
  for (int64_t t = 135; t < T; ++t) {
    const Vec step = values(gated_delta_rule(part(in.q, t, 1), part(in.k, t, 1), part(in.v, t, 1), part(in.g, t, 1),
                                             part(in.beta, t, 1), state));
    out.insert(out.end(), step.begin(), step.end());
  }
  const double bound = chunked_bound(ref, T, dk, dv, 64);
  expect_near_all(out, ref.out, bound, "out");
  expect_near_all(values(state), ref.state, 4 * bound, "state");
}

// bfloat16 and strided inputs are used as their float32 values (checked against the
// float64 reference run on those values); no tokens leave the state alone.
TEST(GatedDeltaRuleChunked, DtypesStridesAndEmpty) {
  std::mt19937 rng(14);
  const int64_t T = 66, Hk = 2, Hv = 2, dk = 8, dv = 16;
  RuleInputs in = rule_inputs(T, Hk, Hv, dk, dv, rng);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const auto expect_matches_reference = [&](const Tensor& q, const Tensor& k, const Tensor& v, const char* what) {
    SCOPED_TRACE(what);
    const RuleReference ref = rule_reference(values(q), values(k), values(v), values(in.g), values(in.beta),
                                             values(in.state), T, Hk, Hv, dk, dv, true, scale);
    Tensor state = in.state.clone();
    const Tensor out = gated_delta_rule_chunked(q, k, v, in.g, in.beta, state);
    const double bound = chunked_bound(ref, T, dk, dv, 64);
    expect_near_all(values(out), ref.out, bound, "out vs reference");
    expect_near_all(values(state), ref.state, 4 * bound, "state vs reference");
  };
  // v laid out [T, dv, Hv] and read transposed; q every other row of a longer tensor.
  const Tensor vt = in.v.transpose(1, 2).contiguous().transpose(1, 2);
  ASSERT_FALSE(vt.is_contiguous());
  const Tensor q2 = zeros({2 * T, Hk, dk});
  q2.slice(0, 0, std::nullopt, 2).copy_(in.q);
  const Tensor qs = q2.slice(0, 0, std::nullopt, 2);
  ASSERT_FALSE(qs.is_contiguous());
  expect_matches_reference(qs, in.k, vt, "strided q and v");
  expect_matches_reference(in.q.to(DType::BFloat16), in.k.to(DType::BFloat16), in.v.to(DType::BFloat16),
                           "bfloat16 q, k, v");

  Tensor state = in.state.clone();
  const Tensor none = gated_delta_rule_chunked(in.q.narrow(0, 0, 0), in.k.narrow(0, 0, 0), in.v.narrow(0, 0, 0),
                                               in.g.narrow(0, 0, 0), in.beta.narrow(0, 0, 0), state);
  EXPECT_EQ(none.sizes(), (Shape{0, Hv, dv}));
  EXPECT_EQ(values(state), values(in.state));
}

// Gates at their extremes: a decay of e^-30 per token underflows the in-chunk products
// e^{G_i} to zero (a term the recurrent form also rounds away), and no decay at all with
// beta = 1 makes each step a full overwrite along k. Neither may give inf or NaN.
TEST(GatedDeltaRuleChunked, ExtremeGates) {
  std::mt19937 rng(15);
  const int64_t T = 100, Hk = 1, Hv = 2, dk = 8, dv = 8;
  for (const auto& [decay, beta] : {std::pair<float, float>{-30.0f, 0.5f}, {0.0f, 1.0f}}) {
    SCOPED_TRACE(::testing::Message() << "g " << decay << " beta " << beta);
    RuleInputs in = rule_inputs(T, Hk, Hv, dk, dv, rng);
    for (int64_t i = 0; i < in.g.numel(); ++i) {
      in.g.data<float>()[i] = decay;
      in.beta.data<float>()[i] = beta;
    }
    const RuleReference ref = rule_reference(values(in.q), values(in.k), values(in.v), values(in.g), values(in.beta),
                                             values(in.state), T, Hk, Hv, dk, dv, true, 1.0 / std::sqrt(8.0));
    Tensor state = in.state.clone();
    const Tensor out = gated_delta_rule_chunked(in.q, in.k, in.v, in.g, in.beta, state);
    const double bound = chunked_bound(ref, T, dk, dv, 64);
    expect_near_all(values(out), ref.out, bound, "out");
    expect_near_all(values(state), ref.state, 4 * bound, "state");
  }
}

// Each key head's chunks, with its group of value heads (or a part of the group when
// there are fewer key heads than threads), are computed whole by one thread, so the
// result does not depend on the thread count: groups kept whole, split in two, split
// one value head per thread.
TEST(GatedDeltaRuleChunked, ThreadCountDoesNotChangeResult) {
  std::mt19937 rng(16);
  for (const Geometry& g : {Geometry{2, 4, 16, 16}, Geometry{1, 3, 17, 9}}) {
    SCOPED_TRACE(::testing::Message() << "Hk " << g.Hk << " Hv " << g.Hv);
    const int64_t T = 130;
    const RuleInputs in = rule_inputs(T, g.Hk, g.Hv, g.dk, g.dv, rng);
    const auto run = [&](int threads) {
      ContextScope scope{ExecutionContext(std::make_shared<ThreadPool>(threads))};
      Tensor state = in.state.clone();
      Vec out = values(gated_delta_rule_chunked(in.q, in.k, in.v, in.g, in.beta, state));
      const Vec s = values(state);
      out.insert(out.end(), s.begin(), s.end());
      return out;
    };
    const Vec one = run(1);
    EXPECT_EQ(run(2), one);
    EXPECT_EQ(run(3), one);
    EXPECT_EQ(run(4), one);
  }
}

TEST(GatedDeltaRuleChunked, BadInputs) {
  const ErrorKind R = ErrorKind::Runtime, T = ErrorKind::Type, V = ErrorKind::Value;
  Tensor q = zeros({2, 2, 4}), v = zeros({2, 4, 3}), g = zeros({2, 4}), state = zeros({4, 4, 3});
  for (int64_t chunk : {int64_t{0}, int64_t{-1}, int64_t{65}}) {
    expect_error([&] { gated_delta_rule_chunked(q, q, v, g, g, state, true, std::nullopt, chunk); }, V,
                 "gated_delta_rule_chunked: chunk_size must be in [1, 64], got " + std::to_string(chunk));
  }
  expect_error([&] { gated_delta_rule_chunked(q, q, zeros({2, 3, 3}), zeros({2, 3}), zeros({2, 3}), state); }, R,
               "value heads (3) must be a multiple of key heads (2)");
  expect_error([&] { gated_delta_rule_chunked(q, q, v, zeros({2, 3}), g, state); }, R,
               "expected g and beta of shape [2, 4]");
  expect_error([&] { Tensor s = zeros({4, 3, 4}); gated_delta_rule_chunked(q, q, v, g, g, s); }, R,
               "expected state of shape [4, 4, 3]");
  expect_error([&] { Tensor s = zeros({4, 4, 3}, DType::BFloat16); gated_delta_rule_chunked(q, q, v, g, g, s); }, T,
               "expected state of dtype float32");
  expect_error([&] { gated_delta_rule_chunked(zeros({2, 2, 4}, DType::Int64), q, v, g, g, state); }, T,
               "gated_delta_rule_chunked: expected q of dtype float32");
  expect_error([&] { gated_delta_rule_chunked(q, q, v, g, g, state, true, NAN); }, V, "scale must be finite");
}


// The whole chunked kernel with dispatch pinned to each SIMD target its pieces were
// built for (the products, the row scaling, the decay weighting and the panel solve all
// follow the pin), against the float64 reference: head dims that are not multiples of
// any lane count, a short last chunk, and groups of value heads sharing a key head.
TEST(GatedDeltaRuleChunked, EveryTargetMatchesReference) {
  simd_targets::for_each(cpu::chunk_gemm_simd_targets() & cpu::chunk_rows_simd_targets(), [] {
    std::mt19937 rng(17);
    for (const Geometry& s : {Geometry{1, 3, 17, 33}, Geometry{2, 4, 16, 8}, Geometry{1, 2, 40, 24}}) {
      for (int64_t T : {1, 63, 130}) {
        SCOPED_TRACE(::testing::Message() << "Hk " << s.Hk << " Hv " << s.Hv << " dk " << s.dk << " dv " << s.dv
                                          << " T " << T);
        const RuleInputs in = rule_inputs(T, s.Hk, s.Hv, s.dk, s.dv, rng);
        const double scale = 1.0 / std::sqrt(static_cast<double>(s.dk));
        const RuleReference ref = rule_reference(values(in.q), values(in.k), values(in.v), values(in.g),
                                                 values(in.beta), values(in.state), T, s.Hk, s.Hv, s.dk, s.dv, true,
                                                 scale);
        Tensor state = in.state.clone();
        const Tensor out = gated_delta_rule_chunked(in.q, in.k, in.v, in.g, in.beta, state);
        const double bound = chunked_bound(ref, T, s.dk, s.dv, 64);
        expect_near_all(values(out), ref.out, bound, "out vs reference");
        expect_near_all(values(state), ref.state, 4 * bound, "state vs reference");
      }
    }
  });
}

}  // namespace
}  // namespace kiln
