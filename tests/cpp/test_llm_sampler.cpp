// Sampler: each logits processor against a plain reference written from Hugging Face's
// definitions (RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
// TopKLogitsWarper, TopPLogitsWarper in its ascending-cumsum form, MinPLogitsWarper),
// draws checked for support and frequencies, determinism per seed, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "llm/sampler.h"
#include "test_util.h"

namespace kiln::llm {
namespace {

using kiln::testing::expect_error;

std::vector<double> softmax(const std::vector<double>& s) {
  double top = -INFINITY;
  for (double v : s) top = std::max(top, v);
  std::vector<double> p(s.size());
  double total = 0.0;
  for (size_t i = 0; i < s.size(); ++i) total += p[i] = std::exp(s[i] - top);
  for (double& v : p) v /= total;
  return p;
}

// The probabilities the processors leave, computed the way transformers writes them.
std::vector<double> reference_probs(const std::vector<float>& logits, const std::vector<int32_t>& history,
                                    const SamplingParams& params) {
  std::vector<double> s(logits.begin(), logits.end());
  if (params.repetition_penalty != 1.0) {
    for (int32_t id : std::set<int32_t>(history.begin(), history.end())) {
      s[id] = s[id] < 0 ? s[id] * params.repetition_penalty : s[id] / params.repetition_penalty;
    }
  }
  if (params.temperature == 0.0) {
    std::vector<double> onehot(s.size(), 0.0);
    onehot[std::max_element(s.begin(), s.end()) - s.begin()] = 1.0;
    return onehot;
  }
  for (double& v : s) v /= params.temperature;
  if (params.top_k > 0 && params.top_k < static_cast<int64_t>(s.size())) {
    std::vector<double> sorted = s;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    const double kth = sorted[params.top_k - 1];
    for (double& v : s) if (v < kth) v = -INFINITY;
  }
  if (params.top_p < 1.0) {
    // Ascending sort, cumulative probability, drop where cumsum <= 1 - top_p, keep the last.
    std::vector<double> p = softmax(s);
    std::vector<size_t> asc(s.size());
    std::iota(asc.begin(), asc.end(), 0);
    std::stable_sort(asc.begin(), asc.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
    double cumulative = 0.0;
    for (size_t j = 0; j + 1 < asc.size(); ++j) {
      cumulative += p[asc[j]];
      if (cumulative <= 1.0 - params.top_p) s[asc[j]] = -INFINITY;
    }
  }
  if (params.min_p > 0.0) {
    std::vector<double> p = softmax(s);
    const double top = *std::max_element(p.begin(), p.end());
    for (size_t i = 0; i < s.size(); ++i) if (p[i] < params.min_p * top) s[i] = -INFINITY;
  }
  return softmax(s);
}

// Draws `n` ids and checks that each lies in the reference support and that the counts
// fit the reference probabilities: Pearson's chi-square over the support has mean df
// and standard deviation sqrt(2 df); df + 6 sd + 10 is far in the tail, and the seed
// is fixed, so the check is deterministic.
void check_draws(const std::vector<float>& logits, const std::vector<int32_t>& history, SamplingParams params,
                 int n = 6000) {
  const std::vector<double> expected = reference_probs(logits, history, params);
  Sampler sampler(params);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    const int32_t id = sampler.sample(logits, history);
    ASSERT_GE(id, 0);
    ASSERT_LT(id, static_cast<int32_t>(logits.size()));
    ASSERT_GT(expected[id], 0.0) << "id " << id << " was filtered out by the reference";
    ++counts[id];
  }
  double chi2 = 0.0;
  int support = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (expected[i] == 0.0) continue;
    ++support;
    const double e = expected[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  const double df = std::max(1, support - 1);
  EXPECT_LT(chi2, df + 6.0 * std::sqrt(2.0 * df) + 10.0) << "support " << support;
}

// Logits whose cumulative probabilities stay clear of the top-p / min-p cut points.
const std::vector<float> kLogits = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f, -0.5f, 2.5f, 0.0f,
                                    1.5f, -2.0f, 0.5f, -3.0f, 1.2f, 0.1f, -0.7f, 2.2f};

TEST(LlmSampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler sampler(SamplingParams{});
  EXPECT_EQ(sampler.sample(kLogits, {}), 3);
  const std::vector<float> tied = {1.0f, 4.0f, 2.0f, 4.0f};
  EXPECT_EQ(sampler.sample(tied, {}), 1);
}

TEST(LlmSampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p;
  p.repetition_penalty = 1.5;
  Sampler sampler(p);
  // 2.0 / 1.5 = 1.33 < 1.9: the repeated id loses its lead.
  EXPECT_EQ(sampler.sample(std::vector<float>{2.0f, 1.9f}, std::vector<int32_t>{0}), 1);
  // -1.0 * 1.5 = -1.5 < -1.2; applied once however often the id repeats.
  EXPECT_EQ(sampler.sample(std::vector<float>{-1.0f, -1.2f}, std::vector<int32_t>{0, 0, 0}), 1);
  // 2.0 / 1.5 = 1.33 > 1.3: a repeat in the history does not penalise twice.
  EXPECT_EQ(sampler.sample(std::vector<float>{2.0f, 1.3f}, std::vector<int32_t>{0, 0}), 0);
}

TEST(LlmSampler, TemperatureMatchesReference) {
  SamplingParams p;
  p.temperature = 0.7;
  p.seed = 1;
  check_draws(kLogits, {}, p);
}

TEST(LlmSampler, TopKKeepsTiesAtTheKthValue) {
  SamplingParams p;
  p.temperature = 1.0;
  p.top_k = 3;
  p.seed = 2;
  const std::vector<float> logits = {5.0f, 4.0f, 3.0f, 3.0f, 1.0f, 0.0f, 4.5f, 2.0f};  // kth = 4.0
  check_draws(logits, {}, p);
  const std::vector<float> tied = {1.0f, 3.0f, 3.0f, 3.0f, 0.0f};  // k = 1: the three tied maxima all survive
  p.top_k = 1;
  std::set<int32_t> seen;
  Sampler sampler(p);
  for (int i = 0; i < 300; ++i) seen.insert(sampler.sample(tied, {}));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2, 3}));
}

TEST(LlmSampler, TopPMatchesReference) {
  for (double top_p : {0.3, 0.8, 0.95}) {
    SamplingParams p;
    p.temperature = 1.0;
    p.top_p = top_p;
    p.seed = 3;
    check_draws(kLogits, {}, p);
  }
  // A single dominant id survives alone, whatever top_p.
  SamplingParams p;
  p.temperature = 1.0;
  p.top_p = 0.01;
  Sampler sampler(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sampler.sample(kLogits, {}), 3);
}

TEST(LlmSampler, MinPMatchesReference) {
  for (double min_p : {0.05, 0.3}) {
    SamplingParams p;
    p.temperature = 1.0;
    p.min_p = min_p;
    p.seed = 4;
    check_draws(kLogits, {}, p);
  }
}

TEST(LlmSampler, AllProcessorsInHuggingFaceOrder) {
  SamplingParams p;
  p.temperature = 0.8;
  p.top_k = 9;
  p.top_p = 0.9;
  p.min_p = 0.04;
  p.repetition_penalty = 1.3;
  p.seed = 5;
  check_draws(kLogits, {3, 6, 1, 3}, p);
}

TEST(LlmSampler, SameSeedSameDraws) {
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 42;
  Sampler a(p), b(p);
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> da, db, dc;
  for (int i = 0; i < 200; ++i) {
    da.push_back(a.sample(kLogits, {}));
    db.push_back(b.sample(kLogits, {}));
    dc.push_back(c.sample(kLogits, {}));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
}

TEST(LlmSampler, InfiniteLogitTakesAllTheMass) {
  SamplingParams p;
  p.temperature = 1.0;
  Sampler sampler(p);
  const std::vector<float> logits = {0.0f, INFINITY, 1.0f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sampler.sample(logits, {}), 1);
  p.temperature = 1e-40;  // finite logits overflow to +inf
  Sampler cold(p);
  EXPECT_EQ(cold.sample(kLogits, {}), 3);
}

TEST(LlmSampler, BadParametersAndInputs) {
  auto with = [](auto change) {
    SamplingParams p;
    change(p);
    return p;
  };
  expect_error([&] { Sampler(with([](SamplingParams& p) { p.temperature = -0.1; })); }, ErrorKind::Value,
               "temperature");
  expect_error([&] { Sampler(with([](SamplingParams& p) { p.temperature = NAN; })); }, ErrorKind::Value, "temperature");
  expect_error([&] { Sampler(with([](SamplingParams& p) { p.top_k = -1; })); }, ErrorKind::Value, "top_k");
  expect_error([&] { Sampler(with([](SamplingParams& p) { p.top_p = 0.0; })); }, ErrorKind::Value, "top_p");
  expect_error([&] { Sampler(with([](SamplingParams& p) { p.top_p = 1.5; })); }, ErrorKind::Value, "top_p");
  expect_error([&] { Sampler(with([](SamplingParams& p) { p.min_p = -0.1; })); }, ErrorKind::Value, "min_p");
  expect_error([&] { Sampler(with([](SamplingParams& p) { p.min_p = 2.0; })); }, ErrorKind::Value, "min_p");
  expect_error([&] { Sampler(with([](SamplingParams& p) { p.repetition_penalty = 0.0; })); }, ErrorKind::Value,
               "repetition_penalty");

  Sampler sampler(SamplingParams{});
  expect_error([&] { sampler.sample(std::vector<float>{}, {}); }, ErrorKind::Value, "empty");
  expect_error([&] { sampler.sample(std::vector<float>{0.0f, NAN}, {}); }, ErrorKind::Value, "id 1 is NaN");
  expect_error([&] { sampler.sample(std::vector<float>{-INFINITY, -INFINITY}, {}); }, ErrorKind::Value, "-inf");
  Sampler penalised(with([](SamplingParams& p) { p.repetition_penalty = 1.2; }));
  expect_error([&] { penalised.sample(std::vector<float>{0.0f, 1.0f}, std::vector<int32_t>{2}); }, ErrorKind::Index,
               "history id 2");
}

}  // namespace
}  // namespace kiln::llm
