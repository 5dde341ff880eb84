// scaled_dot_product_attention and attention_decode against a naive double-precision
// reference: softmax(q k^T * scale + bias) v, row by row, with -inf for masked keys and
// zeros for rows whose every key is masked (kiln decision 5).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "backend/cpu/attention/attention_kernels.h"
#include "backend/cpu/common/random.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/creation.h"
#include "kiln/thread_pool.h"
#include "kiln/type_promotion.h"
#include "nn_test_utils.h"

namespace kiln {
namespace {

using nn_test::expect_error;
using nn_test::from_doubles;
using nn_test::near;
using nn_test::random_sample;
using nn_test::to_doubles;

struct RefOptions {
  std::optional<Tensor> mask;
  bool causal = false;
  std::optional<double> scale;
  bool gqa = false;
  // Dropout: keep[r * L * S + i * S + j] (already divided by 1 - p) multiplies weight (i, j).
  const std::vector<double>* keep = nullptr;
};

// K or V with its head dim repeat_interleaved to `heads` (GQA), as a contiguous double tensor.
Tensor expand_heads(const Tensor& x, int64_t heads) {
  Tensor d = x.to(DType::Float64);
  const int64_t h = x.size(-3);
  if (h == heads) return d;
  Shape s = d.shape();
  Tensor u = d.unsqueeze(-3);  // [..., h, 1, S, E]
  Shape e = u.shape();
  e[e.size() - 3] = heads / h;
  s[s.size() - 3] = heads;
  return u.expand(e).reshape(s);
}

Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, const RefOptions& o) {
  Tensor kk = o.gqa ? expand_heads(k, q.size(-3)) : k.to(DType::Float64);
  Tensor vv = o.gqa ? expand_heads(v, q.size(-3)) : v.to(DType::Float64);
  const Shape qb(q.sizes().begin(), q.sizes().end() - 2), kb(kk.sizes().begin(), kk.sizes().end() - 2),
      vb(vv.sizes().begin(), vv.sizes().end() - 2);
  const Shape batch = broadcast_shapes({qb, kb, vb});
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1);
  auto full = [&](const Tensor& t, int64_t a, int64_t b) {
    Shape s = batch;
    s.push_back(a);
    s.push_back(b);
    return to_doubles(t.to(DType::Float64).expand(s));
  };
  const std::vector<double> Q = full(q, L, E), K = full(kk, S, E), V = full(vv, S, Ev);
  std::vector<double> M;
  if (o.mask) M = o.mask->dtype() == DType::Bool ? full(o.mask->to(DType::Float64), L, S) : full(*o.mask, L, S);
  const bool bool_mask = o.mask && o.mask->dtype() == DType::Bool;
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  const int64_t rows = shape_numel(batch);
  std::vector<double> out(static_cast<size_t>(rows * L * Ev), 0.0), s(static_cast<size_t>(S));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < L; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += Q[(r * L + i) * E + e] * K[(r * S + j) * E + e];
        double x = dot * scale;
        if (o.mask) {
          const double m = M[(r * L + i) * S + j];
          x = bool_mask ? (m != 0 ? x : -INFINITY) : x + m;
        }
        if (o.causal && j > i) x = -INFINITY;
        s[j] = x;
        mx = std::max(mx, x);
      }
      if (mx == -INFINITY) continue;  // fully masked: zeros
      double sum = 0;
      for (int64_t j = 0; j < S; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int64_t j = 0; j < S; ++j) {
        double w = s[j] / sum;
        if (o.keep) w *= (*o.keep)[(r * L + i) * S + j];
        for (int64_t c = 0; c < Ev; ++c) out[(r * L + i) * Ev + c] += w * V[(r * S + j) * Ev + c];
      }
    }
  }
  Shape shape = batch;
  shape.push_back(L);
  shape.push_back(Ev);
  return from_doubles(out, shape, DType::Float64);
}

// Tolerance for inputs in [-1, 1] (|v| <= 1, so |out| <= 1) and masks of magnitude <= 2.
// A score is a length-E dot product times the scale: its rounding error is at most
// E * u * sum|q_e k_e| * scale <= E^2 * u * scale. Each weight e^(s - m) / l then has a
// relative error of at most 2x that (s and m) plus the exp's 2 ulp and the sum's S * u;
// the output, a convex combination of |v| <= 1, adds S * u of accumulation. Narrow
// dtypes then round the output once (u of the storage dtype, |out| <= 1).
double tolerance(DType dtype, int64_t S, int64_t E, double scale) {
  const double u = nn_test::compute_roundoff(dtype);
  const double score = static_cast<double>(E * E) * u * scale;
  double tol = 2 * score + (8.0 + 2.0 * static_cast<double>(S)) * u;
  if (dtype == DType::BFloat16 || dtype == DType::Float16) tol += nn_test::unit_roundoff(dtype);
  return 4 * tol;  // slack for the fast exp's flush of weights below 2^-126 and rescaling
}

void expect_matches(const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = to_doubles(got), w = to_doubles(want);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_TRUE(near(g[i], w[i], tol)) << "element " << i;
}

void check(const Tensor& q, const Tensor& k, const Tensor& v, const RefOptions& o = {}) {
  const Tensor got = scaled_dot_product_attention(q, k, v, o.mask, 0.0, o.causal, o.scale, o.gqa);
  EXPECT_EQ(got.dtype(), q.dtype());
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  expect_matches(got, reference(q, k, v, o), tolerance(q.dtype(), k.size(-2), q.size(-1), scale));
}

Tensor rnd(const Shape& shape, DType dtype, uint32_t seed) { return random_sample(shape, dtype, seed).tensor; }

// Every (L, S, E) of the issue, float32, batch 2 x 3 heads, Ev = E.
TEST(Attention, SizesSweepFloat32) {
  uint32_t seed = 1;
  for (int64_t L : {1, 2, 7, 16, 33, 100})
    for (int64_t S : {1, 2, 7, 16, 33, 100})
      for (int64_t E : {1, 8, 40, 64, 80, 128}) {
        SCOPED_TRACE(testing::Message() << "L=" << L << " S=" << S << " E=" << E);
        check(rnd({2, 3, L, E}, DType::Float32, seed), rnd({2, 3, S, E}, DType::Float32, seed + 1),
              rnd({2, 3, S, E}, DType::Float32, seed + 2));
        seed += 3;
      }
}

TEST(Attention, CausalTopLeftAndValueDim) {
  for (int64_t L : {1, 2, 7, 33, 100})
    for (int64_t S : {1, 7, 16, 100}) {
      SCOPED_TRACE(testing::Message() << "L=" << L << " S=" << S);
      RefOptions o;
      o.causal = true;
      check(rnd({2, 2, L, 40}, DType::Float32, 5), rnd({2, 2, S, 40}, DType::Float32, 6),
            rnd({2, 2, S, 24}, DType::Float32, 7), o);
    }
}

TEST(Attention, EveryHighwayTarget) {
  nn_test::for_each_target(cpu::attention_simd_targets(), [] {
    for (int64_t L : {1, 33})
      for (int64_t S : {7, 100, 700}) {
        RefOptions o;
        o.causal = L > 1;
        check(rnd({1, 4, L, 40}, DType::Float32, 8), rnd({1, 2, S, 40}, DType::Float32, 9),
              rnd({1, 2, S, 40}, DType::Float32, 10), {std::nullopt, L > 1, std::nullopt, true});
        check(rnd({1, 4, L, 17}, DType::BFloat16, 8), rnd({1, 4, S, 17}, DType::BFloat16, 9),
              rnd({1, 4, S, 9}, DType::BFloat16, 10), o);
        check(rnd({1, 2, L, 17}, DType::Float64, 8), rnd({1, 2, S, 17}, DType::Float64, 9),
              rnd({1, 2, S, 9}, DType::Float64, 10), o);
      }
  });
}

// Bool masks (with fully masked rows) and float masks, full-size and broadcast.
TEST(Attention, MasksBoolFloatAndBroadcast) {
  const int64_t N = 2, H = 3, L = 7, S = 33, E = 16;
  const Tensor q = rnd({N, H, L, E}, DType::Float32, 11), k = rnd({N, H, S, E}, DType::Float32, 12),
               v = rnd({N, H, S, E}, DType::Float32, 13);
  for (const Shape& ms : std::vector<Shape>{{N, H, L, S}, {L, S}, {S}, {1, H, 1, S}, {N, 1, L, S}, {H, L, 1}, {}}) {
    SCOPED_TRACE(shape_to_string(ms));
    // Bool: about 1 in 3 keys hidden; row 2 of the mask fully hidden when the mask has rows.
    std::vector<double> bits = nn_test::uniform(shape_numel(ms), 14, 0, 1);
    for (double& b : bits) b = b < 0.35 ? 0 : 1;
    if (ms.size() >= 2 && ms[ms.size() - 2] == L && ms.back() == S) {
      const int64_t before = shape_numel(ms) / (L * S);
      for (int64_t bi = 0; bi < before; ++bi)
        for (int64_t j = 0; j < S; ++j) bits[(bi * L + 2) * S + j] = 0;
    }
    RefOptions o;
    o.mask = from_doubles(bits, ms, DType::Bool);
    check(q, k, v, o);
    o.mask = random_sample(ms, DType::Float32, 15, -2.0, 2.0).tensor;
    check(q, k, v, o);
  }
}

TEST(Attention, FullyMaskedRowsAreZeros) {
  const Tensor q = rnd({1, 1, 4, 8}, DType::Float32, 16), k = rnd({1, 1, 5, 8}, DType::Float32, 17),
               v = rnd({1, 1, 5, 8}, DType::Float32, 18);
  const Tensor none = zeros({4, 5}, DType::Bool);
  const std::vector<double> got = to_doubles(scaled_dot_product_attention(q, k, v, none));
  for (double x : got) EXPECT_EQ(x, 0.0);
  // A float mask of -inf everywhere, and L == 1 (the decode shape) through a mask.
  const Tensor ninf = full({4, 5}, Scalar(-INFINITY));
  for (double x : to_doubles(scaled_dot_product_attention(q, k, v, ninf))) EXPECT_EQ(x, 0.0);
  // S == 0: nothing to attend to.
  const Tensor k0 = rnd({1, 1, 0, 8}, DType::Float32, 19), v0 = rnd({1, 1, 0, 8}, DType::Float32, 20);
  for (double x : to_doubles(scaled_dot_product_attention(q, k0, v0))) EXPECT_EQ(x, 0.0);
}

TEST(Attention, MaskDtypes) {
  const Tensor q = rnd({2, 7, 16}, DType::BFloat16, 21), k = rnd({2, 9, 16}, DType::BFloat16, 22),
               v = rnd({2, 9, 16}, DType::BFloat16, 23);
  RefOptions o;
  o.mask = rnd({7, 9}, DType::Float32, 24);  // float32 mask with bfloat16 q
  check(q, k, v, o);
  o.mask = rnd({7, 9}, DType::BFloat16, 25);  // q's own dtype
  check(q, k, v, o);
}

TEST(Attention, GqaRatiosAndBroadcastHeads) {
  for (int64_t ratio : {1, 2, 4})
    for (int64_t L : {1, 7, 33}) {
      SCOPED_TRACE(testing::Message() << "ratio=" << ratio << " L=" << L);
      RefOptions o;
      o.gqa = true;
      check(rnd({2, 8, L, 40}, DType::Float32, 26), rnd({2, 8 / ratio, 100, 40}, DType::Float32, 27),
            rnd({2, 8 / ratio, 100, 40}, DType::Float32, 28), o);
    }
  // Without enable_gqa one K/V head broadcasts to every query head.
  check(rnd({2, 4, 3, 8}, DType::Float32, 29), rnd({2, 1, 5, 8}, DType::Float32, 30),
        rnd({2, 1, 5, 8}, DType::Float32, 31));
}

TEST(Attention, BatchBroadcastingAndRanks) {
  check(rnd({2, 1, 3, 5, 8}, DType::Float32, 32), rnd({1, 4, 3, 6, 8}, DType::Float32, 33),
        rnd({4, 3, 6, 8}, DType::Float32, 34));
  check(rnd({5, 8}, DType::Float32, 35), rnd({6, 8}, DType::Float32, 36), rnd({6, 3}, DType::Float32, 37));
  check(rnd({2, 5, 8}, DType::Float32, 38), rnd({6, 8}, DType::Float32, 39), rnd({2, 6, 3}, DType::Float32, 40));
  RefOptions o;
  o.scale = 0.3;
  check(rnd({2, 3, 5, 8}, DType::Float32, 41), rnd({2, 3, 6, 8}, DType::Float32, 42),
        rnd({2, 3, 6, 8}, DType::Float32, 43), o);
}

TEST(Attention, NonContiguousInputs) {
  // K/V stored [N, S, H, E] (a cache layout) viewed as [N, H, S, E].
  const Tensor k = rnd({2, 33, 4, 40}, DType::Float32, 44).transpose(1, 2);
  const Tensor v = rnd({2, 33, 4, 24}, DType::Float32, 45).transpose(1, 2);
  // q sliced with a step along L; another q with a strided last dim (copied once).
  const Tensor q_step = rnd({2, 4, 14, 40}, DType::Float32, 46).slice(2, 0, std::nullopt, 2);
  const Tensor q_tr = rnd({2, 4, 40, 7}, DType::Float32, 47).transpose(2, 3);
  check(q_step, k, v);
  check(q_tr, k, v);
  check(q_step.slice(2, 0, 1), k, v);  // decode shape through strided views
  RefOptions o;
  o.causal = true;
  check(q_step, k, v, o);
  // Broadcast (stride 0) batch views.
  check(rnd({1, 4, 7, 40}, DType::Float32, 48).expand({3, 4, 7, 40}), rnd({1, 4, 9, 40}, DType::Float32, 49),
        rnd({3, 4, 9, 40}, DType::Float32, 50));
}

TEST(Attention, NarrowAndDoubleDtypes) {
  for (DType dt : {DType::BFloat16, DType::Float16, DType::Float64})
    for (int64_t L : {1, 16, 100}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " L=" << L);
      RefOptions o;
      check(rnd({2, 4, L, 80}, dt, 51), rnd({2, 2, 100, 80}, dt, 52), rnd({2, 2, 100, 80}, dt, 53),
            {std::nullopt, false, std::nullopt, true});
      o.causal = true;
      check(rnd({1, 2, L, 64}, dt, 54), rnd({1, 2, 33, 64}, dt, 55), rnd({1, 2, 33, 64}, dt, 56), o);
      o.causal = false;
      std::vector<double> bits = nn_test::uniform(L * 33, 57, 0, 1);
      for (double& b : bits) b = b < 0.3 ? 0 : 1;
      o.mask = from_doubles(bits, {L, 33}, DType::Bool);
      check(rnd({1, 2, L, 64}, dt, 58), rnd({1, 2, 33, 64}, dt, 59), rnd({1, 2, 33, 64}, dt, 60), o);
    }
}

// L == 1 without a mask runs the decode kernel; an all-true mask forces the general
// kernel on the same data. Long contexts split across threads.
TEST(Attention, DecodeKernelVsGeneralVsReference) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16, DType::Float64})
    for (int64_t S : {1, 100, 1000, 5000}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " S=" << S);
      const Tensor q = rnd({1, 8, 1, 80}, dt, 61);
      const Tensor k = rnd({1, S, 2, 80}, dt, 62).transpose(1, 2), v = rnd({1, S, 2, 80}, dt, 63).transpose(1, 2);
      const Tensor fast = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, false, std::nullopt, true);
      const Tensor general =
          scaled_dot_product_attention(q, k, v, ones({1, S}, DType::Bool), 0.0, false, std::nullopt, true);
      const Tensor want = reference(q, k, v, {std::nullopt, false, std::nullopt, true});
      const double tol = tolerance(dt, S, 80, 1.0 / std::sqrt(80.0));
      expect_matches(fast, want, tol);
      expect_matches(general, want, tol);
    }
}

TEST(Attention, DecodeCausalSeesKeyZeroOnly) {
  const Tensor q = rnd({2, 3, 1, 8}, DType::Float32, 64), k = rnd({2, 3, 9, 8}, DType::Float32, 65),
               v = rnd({2, 3, 9, 8}, DType::Float32, 66);
  const Tensor got = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true);
  expect_matches(got, v.slice(2, 0, 1).to(DType::Float64), 0.0);
}

TEST(Attention, AttentionDecodeEntryPoint) {
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    const int64_t B = 2, Hq = 8, Hkv = 2, S_max = 300, E = 40;
    const Tensor q = rnd({B, Hq, E}, dt, 67);
    const Tensor kc = rnd({B, S_max, Hkv, E}, dt, 68).transpose(1, 2);
    const Tensor vc = rnd({B, Hkv, S_max, 24}, dt, 69);
    for (int64_t valid : {1, 7, 257, 300}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " valid_len=" << valid);
      const Tensor got = attention_decode(q, kc, vc, valid);
      ASSERT_EQ(got.shape(), (Shape{B, Hq, 24}));
      const Tensor want = reference(q.unsqueeze(2), kc.narrow(2, 0, valid), vc.narrow(2, 0, valid),
                                    {std::nullopt, false, std::nullopt, true});
      expect_matches(got, want.view({B, Hq, 24}), tolerance(dt, valid, E, 1.0 / std::sqrt(40.0)));
    }
    for (double x : to_doubles(attention_decode(q, kc, vc, 0))) EXPECT_EQ(x, 0.0);
  }
}

// The decode kernel on every target: GQA groups of 1 to 12 query heads per K/V head (the
// kernel groups at most 8 rows and scores them 4 or 2 at a time), head dims that are
// lane multiples (read in place) and not (widened into scratch first), contexts that end
// mid-block or are split into slices, and K/V rows strided as in a [B, S, H, E] cache.
TEST(Attention, DecodeGroupsHeadDimsEveryTarget) {
  nn_test::for_each_target(cpu::attention_simd_targets(), [] {
    uint32_t seed = 80;
    for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16, DType::Float64})
      for (int64_t group : {1, 3, 4, 5, 12})
        for (int64_t E : {16, 80, 40, 17})
          for (int64_t S : {1, 17, 600}) {
            // Narrow and double dtypes take fewer shapes: their paths differ only in the widening.
            if (dt != DType::Float32 && dt != DType::BFloat16 && (group == 3 || group == 5 || S == 17)) continue;
            SCOPED_TRACE(testing::Message() << dtype_name(dt) << " group=" << group << " E=" << E << " S=" << S);
            const int64_t Ev = E == 17 ? 9 : E;
            const Tensor q = rnd({1, 2 * group, 1, E}, dt, seed);
            const Tensor k = rnd({1, S, 2, E}, dt, seed + 1).transpose(1, 2);
            const Tensor v = rnd({1, S, 2, Ev}, dt, seed + 2).transpose(1, 2);
            check(q, k, v, {std::nullopt, false, std::nullopt, true});
            seed += 3;
          }
  });
}

// Scores that rise (or fall) along the context move the running max in every block, so
// every block rescales what the previous ones accumulated; a scale of 4 spreads the
// weights over several orders of magnitude.
TEST(Attention, DecodeRunningMaxRescales) {
  const int64_t S = 700, E = 80, Hq = 4;
  for (DType dt : {DType::Float32, DType::BFloat16})
    for (bool rising : {true, false}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << (rising ? " rising" : " falling"));
      const Tensor q = rnd({1, Hq, 1, E}, dt, 90);
      // k_j = (j / S) q_0 (or reversed): q_0 . k_j grows (falls) with j for head 0 and the
      // other heads see mixed trends.
      const std::vector<double> q0 = to_doubles(q.slice(1, 0, 1));
      std::vector<double> kd(static_cast<size_t>(S * E));
      for (int64_t j = 0; j < S; ++j) {
        const double w = static_cast<double>(rising ? j : S - 1 - j) / static_cast<double>(S);
        for (int64_t e = 0; e < E; ++e) kd[static_cast<size_t>(j * E + e)] = w * q0[static_cast<size_t>(e)];
      }
      const Tensor k = from_doubles(kd, {1, 1, S, E}, dt);
      const Tensor v = rnd({1, 1, S, E}, dt, 91);
      RefOptions o;
      o.gqa = true;
      o.scale = 4.0;
      check(q, k, v, o);
    }
}

TEST(Attention, DropoutMatchesPhiloxStream) {
  const int64_t N = 2, H = 2, L = 7, S = 37, E = 8;
  const double p = 0.3;
  const Tensor q = rnd({N, H, L, E}, DType::Float32, 70), k = rnd({N, H, S, E}, DType::Float32, 71),
               v = rnd({N, H, S, E}, DType::Float32, 72);
  for (bool causal : {false, true}) {
    manual_seed(1234);
    const Tensor got = scaled_dot_product_attention(q, k, v, std::nullopt, p, causal);
    // The stream starts at the freshly seeded generator's first counter.
    std::vector<float> u(static_cast<size_t>(N * H * L * S));
    cpu::fill_uniform_f32(default_thread_pool(), {1234, 0}, u.data(), static_cast<int64_t>(u.size()));
    std::vector<double> keep(u.size());
    for (size_t i = 0; i < u.size(); ++i) keep[i] = u[i] < 1.0 - p ? 1.0 / (1.0 - p) : 0.0;
    RefOptions o;
    o.causal = causal;
    o.keep = &keep;
    expect_matches(got, reference(q, k, v, o), 4 * tolerance(DType::Float32, S, E, 1.0 / std::sqrt(8.0)));
  }
  // p == 1 drops everything.
  for (double x : to_doubles(scaled_dot_product_attention(q, k, v, std::nullopt, 1.0))) EXPECT_EQ(x, 0.0);
}

TEST(Attention, ValidationErrors) {
  const Tensor q = rnd({2, 4, 3, 8}, DType::Float32, 73), k = rnd({2, 2, 5, 8}, DType::Float32, 74),
               v = rnd({2, 2, 5, 8}, DType::Float32, 75);
  const char* op = "scaled_dot_product_attention";
  expect_error([&] { scaled_dot_product_attention(q, k.to(DType::Float64), v); }, ErrorKind::Type,
               {op, "same dtype"});
  expect_error([&] { scaled_dot_product_attention(q.to(DType::Int32), k.to(DType::Int32), v.to(DType::Int32)); },
               ErrorKind::Type, {op, "int32"});
  expect_error([&] { scaled_dot_product_attention(rnd({8}, DType::Float32, 1), k, v); }, ErrorKind::Runtime,
               {op, "at least 2 dims"});
  expect_error([&] { scaled_dot_product_attention(q, rnd({2, 2, 5, 7}, DType::Float32, 1), v); },
               ErrorKind::Runtime, {op, "embedding dim"});
  expect_error([&] { scaled_dot_product_attention(q, k, rnd({2, 2, 6, 8}, DType::Float32, 1)); },
               ErrorKind::Runtime, {op, "sequence length"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, false, std::nullopt, false); },
               ErrorKind::Runtime, {op});  // heads 4 vs 2 do not broadcast
  expect_error(
      [&] {
        scaled_dot_product_attention(q, rnd({2, 3, 5, 8}, DType::Float32, 1), rnd({2, 3, 5, 8}, DType::Float32, 2),
                                     std::nullopt, 0.0, false, std::nullopt, true);
      },
      ErrorKind::Runtime, {op, "divisible"});
  expect_error(
      [&] {
        scaled_dot_product_attention(rnd({3, 8}, DType::Float32, 1), rnd({5, 8}, DType::Float32, 2),
                                     rnd({5, 8}, DType::Float32, 3), std::nullopt, 0.0, false, std::nullopt, true);
      },
      ErrorKind::Runtime, {op, "head dim"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({3, 5}, DType::Bool), 0.0, true, {}, true); },
               ErrorKind::Runtime, {op, "is_causal"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({4, 5}, DType::Bool), 0.0, false, {}, true); },
               ErrorKind::Runtime, {op, "does not broadcast", "[4, 5]"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({3, 5}, DType::Int64), 0.0, false, {}, true); },
               ErrorKind::Type, {op, "attn_mask dtype", "int64"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({3, 5}, DType::Float64), 0.0, false, {}, true); },
               ErrorKind::Type, {op, "attn_mask dtype", "float64"});
  for (double bad : {-0.1, 1.5, std::nan("")})
    expect_error([&] { scaled_dot_product_attention(q, k, v, std::nullopt, bad, false, {}, true); },
                 ErrorKind::Value, {op, "dropout_p"});

  const char* dop = "attention_decode";
  const Tensor q3 = rnd({2, 4, 8}, DType::Float32, 76);
  expect_error([&] { attention_decode(q3, k, v, 6); }, ErrorKind::Index, {dop, "valid_len 6", "[0, 5]"});
  expect_error([&] { attention_decode(q3, k, v, -1); }, ErrorKind::Index, {dop, "valid_len -1"});
  expect_error([&] { attention_decode(q, k, v, 1); }, ErrorKind::Runtime, {dop, "expected q [B, Hq, E]"});
  expect_error([&] { attention_decode(q3, rnd({2, 3, 5, 8}, DType::Float32, 1), rnd({2, 3, 5, 8}, DType::Float32, 2), 1); },
               ErrorKind::Runtime, {dop, "multiple of the KV heads"});
  expect_error([&] { attention_decode(q3, k, rnd({2, 2, 4, 8}, DType::Float32, 1), 1); }, ErrorKind::Runtime,
               {dop, "same Hkv and S_max"});
  expect_error([&] { attention_decode(q3.to(DType::BFloat16), k, v, 1); }, ErrorKind::Type, {dop, "same dtype"});
}

}  // namespace
}  // namespace kiln
