// The gated delta rule's float64 reference and random inputs, shared by the tests of
// the recurrent and the chunked forms (test_gated_delta*.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/tensor.h"

namespace kiln::gated_delta_testing {

using Vec = std::vector<double>;
constexpr double kU = 1.0 / (1 << 24);  // float32 unit roundoff

// A float32 tensor of `shape` with values uniform in [-scale, scale], and its values.
inline Tensor random_tensor(const Shape& shape, std::mt19937& rng, double scale = 1.0) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  std::uniform_real_distribution<float> dist(-static_cast<float>(scale), static_cast<float>(scale));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}
inline Vec values(const Tensor& t) {
  const Tensor f = t.to(DType::Float32).contiguous();
  return Vec(f.data<float>(), f.data<float>() + f.numel());
}

// Straight from transformers' torch_recurrent_gated_delta_rule: q/k repeated over the
// value heads, normalised, the state decayed, read, corrected and read again per token.
struct RuleReference {
  Vec out, state;
  double scale_of_out = 1.0;  // max |out| for the bound
};
inline RuleReference rule_reference(const Vec& q, const Vec& k, const Vec& v, const Vec& g, const Vec& beta, Vec S,
                                    int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, bool l2, double scale) {
  RuleReference ref{Vec(T * Hv * dv, 0.0), {}, 1.0};
  for (int64_t h = 0; h < Hv; ++h) {
    const int64_t kh = h / (Hv / Hk);
    double* s = S.data() + h * dk * dv;
    for (int64_t t = 0; t < T; ++t) {
      Vec qt(q.begin() + (t * Hk + kh) * dk, q.begin() + (t * Hk + kh + 1) * dk);
      Vec kt(k.begin() + (t * Hk + kh) * dk, k.begin() + (t * Hk + kh + 1) * dk);
      if (l2) {
        double qq = 0, kk = 0;
        for (int64_t r = 0; r < dk; ++r) qq += qt[r] * qt[r], kk += kt[r] * kt[r];
        for (int64_t r = 0; r < dk; ++r) qt[r] /= std::sqrt(qq + 1e-6), kt[r] /= std::sqrt(kk + 1e-6);
      }
      for (double& x : qt) x *= scale;
      const double decay = std::exp(g[t * Hv + h]), b = beta[t * Hv + h];
      for (int64_t i = 0; i < dk * dv; ++i) s[i] *= decay;
      for (int64_t c = 0; c < dv; ++c) {
        double mem = 0;
        for (int64_t r = 0; r < dk; ++r) mem += s[r * dv + c] * kt[r];
        const double delta = b * (v[(t * Hv + h) * dv + c] - mem);
        for (int64_t r = 0; r < dk; ++r) s[r * dv + c] += kt[r] * delta;
      }
      for (int64_t c = 0; c < dv; ++c) {
        double o = 0;
        for (int64_t r = 0; r < dk; ++r) o += s[r * dv + c] * qt[r];
        ref.out[(t * Hv + h) * dv + c] = o;
        ref.scale_of_out = std::max(ref.scale_of_out, std::abs(o));
      }
    }
  }
  ref.state = std::move(S);
  return ref;
}

// Each token's reads are dot products of length dk and the update one multiply-add per
// entry, so a step errs by about (dk + 4) u relative to the state's scale, and the errors
// of T steps add up (the decay keeps the state bounded): bound 4 T (dk + dv + 8) u of
// max(1, max |out|) (the state's entries are of the order of v's, which is 1 here).
inline void expect_rule_close(const Tensor& out, const Tensor& state, const RuleReference& ref, int64_t T, int64_t dk,
                              int64_t dv) {
  const double bound = 4.0 * std::max<int64_t>(T, 1) * (dk + dv + 8) * kU * ref.scale_of_out;
  const Vec o = values(out), s = values(state);
  for (size_t i = 0; i < o.size(); ++i) ASSERT_NEAR(o[i], ref.out[i], bound) << "out " << i;
  for (size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(s[i], ref.state[i], bound * 4) << "state " << i;
}

struct RuleInputs {
  Tensor q, k, v, g, beta, state;
};
inline RuleInputs rule_inputs(int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, std::mt19937& rng) {
  RuleInputs in{random_tensor({T, Hk, dk}, rng), random_tensor({T, Hk, dk}, rng), random_tensor({T, Hv, dv}, rng),
                random_tensor({T, Hv}, rng, 1.0), random_tensor({T, Hv}, rng, 1.0),
                random_tensor({Hv, dk, dv}, rng, 0.5)};
  // g <= 0 (decays in (0, 1]), beta in (0, 1), as the gates produce them.
  for (int64_t i = 0; i < in.g.numel(); ++i) {
    in.g.data<float>()[i] = -std::abs(in.g.data<float>()[i]);
    in.beta.data<float>()[i] = 0.5f + 0.5f * in.beta.data<float>()[i];
  }
  return in;
}
}  // namespace kiln::gated_delta_testing
