// Hugging Face's logits processors on one row of float32 logits, in their order:
// RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper,
// TopPLogitsWarper, MinPLogitsWarper; then a multinomial draw.
//
// The candidate list `order_` is kept in ascending id order except after top-p, which
// sorts by descending logit (ties: lower id first), so a draw depends only on the
// logits, the history and the seed (std::mt19937_64 is specified bit for bit by the
// standard; the uniform draw is formed here rather than by a library distribution,
// whose algorithm is implementation-defined).
#include "llm/sampler.h"

#include <algorithm>
#include <cmath>

#include "kiln/error.h"

namespace kiln::llm {
namespace {

constexpr const char* kOp = "Sampler";

// Uniform double in [0, 1) from the top 53 bits of one 64-bit draw.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  KILN_CHECK_KIND(std::isfinite(params.temperature) && params.temperature >= 0.0, Value, kOp,
                  "temperature must be a finite number >= 0 (0 = greedy), got {}", params.temperature);
  KILN_CHECK_KIND(params.top_k >= 0, Value, kOp, "top_k must be >= 0 (0 = off), got {}", params.top_k);
  KILN_CHECK_KIND(params.top_p > 0.0 && params.top_p <= 1.0, Value, kOp, "top_p must be in (0, 1] (1 = off), got {}",
                  params.top_p);
  KILN_CHECK_KIND(params.min_p >= 0.0 && params.min_p <= 1.0, Value, kOp, "min_p must be in [0, 1] (0 = off), got {}",
                  params.min_p);
  KILN_CHECK_KIND(std::isfinite(params.repetition_penalty) && params.repetition_penalty > 0.0, Value, kOp,
                  "repetition_penalty must be a finite number > 0 (1 = off), got {}", params.repetition_penalty);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  KILN_CHECK_KIND(vocab > 0, Value, kOp, "the logits row is empty");
  work_.assign(logits.begin(), logits.end());
  for (int64_t i = 0; i < vocab; ++i) {
    KILN_CHECK_KIND(!std::isnan(work_[i]), Value, kOp, "the logit of id {} is NaN", i);
  }

  // Repetition penalty: once per distinct id of the history (HF gathers, then scatters).
  if (params_.repetition_penalty != 1.0) {
    const float penalty = static_cast<float>(params_.repetition_penalty);
    penalized_.assign(static_cast<size_t>(vocab), 0);
    for (int32_t id : history) {
      KILN_CHECK_KIND(id >= 0 && id < vocab, Index, kOp, "history id {} is outside the vocabulary of {} ids", id,
                      vocab);
      if (penalized_[id]) continue;
      penalized_[id] = 1;
      const float v = work_[id];
      work_[id] = v < 0.0f ? v * penalty : v / penalty;
    }
  }

  const auto best = std::max_element(work_.begin(), work_.end());  // first maximum: lowest id on ties
  KILN_CHECK_KIND(*best > -INFINITY, Value, kOp, "every logit is -inf: nothing to choose from");
  const int32_t best_id = static_cast<int32_t>(best - work_.begin());
  if (params_.temperature == 0.0) return best_id;

  if (params_.temperature != 1.0) {
    const float temperature = static_cast<float>(params_.temperature);
    for (float& v : work_) v /= temperature;
  }
  // An infinite logit takes all the probability mass, and a temperature so small that
  // finite logits overflow is the greedy limit: either way the (first) largest logit
  // wins, where exp(inf - inf) would give NaN.
  if (*std::max_element(work_.begin(), work_.end()) == INFINITY) return best_id;

  order_.clear();
  for (int64_t i = 0; i < vocab; ++i) {
    if (work_[i] > -INFINITY) order_.push_back(static_cast<int32_t>(i));
  }

  // Top-k: keep every logit >= the k-th largest (HF removes `score < kth`, so ties with
  // the k-th value survive).
  if (params_.top_k > 0 && params_.top_k < static_cast<int64_t>(order_.size())) {
    std::vector<float>& values = scratch_;
    values.clear();
    for (int32_t id : order_) values.push_back(work_[id]);
    std::nth_element(values.begin(), values.begin() + (params_.top_k - 1), values.end(), std::greater<float>());
    const float kth = values[params_.top_k - 1];
    std::erase_if(order_, [&](int32_t id) { return work_[id] < kth; });
  }

  // Top-p: the smallest highest-probability prefix whose mass reaches top_p (at least
  // one id). Equivalent to HF's "drop ids whose ascending cumulative mass <= 1 - top_p".
  if (params_.top_p < 1.0) {
    std::sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
      return work_[a] > work_[b] || (work_[a] == work_[b] && a < b);
    });
    const double top = work_[order_.front()];
    double total = 0.0;
    for (int32_t id : order_) total += std::exp(static_cast<double>(work_[id]) - top);
    double cumulative = 0.0;
    size_t keep = 0;
    while (keep < order_.size()) {
      cumulative += std::exp(static_cast<double>(work_[order_[keep]]) - top) / total;
      ++keep;
      if (cumulative >= params_.top_p) break;
    }
    order_.resize(keep);
  }

  // Min-p: drop ids whose probability is below min_p times the largest one; the
  // largest always survives (exp(0) >= min_p for min_p <= 1).
  if (params_.min_p > 0.0) {
    float top = -INFINITY;
    for (int32_t id : order_) top = std::max(top, work_[id]);
    std::erase_if(order_, [&](int32_t id) {
      return std::exp(static_cast<double>(work_[id]) - top) < params_.min_p;
    });
  }

  // Multinomial draw over the survivors (softmax of their processed logits).
  float top = -INFINITY;
  for (int32_t id : order_) top = std::max(top, work_[id]);
  double total = 0.0;
  for (int32_t id : order_) total += std::exp(static_cast<double>(work_[id]) - top);
  const double target = uniform01(rng_) * total;
  double cumulative = 0.0;
  for (int32_t id : order_) {
    cumulative += std::exp(static_cast<double>(work_[id]) - top);
    if (target < cumulative) return id;
  }
  return order_.back();  // rounding left target at the very top of the range
}

}  // namespace kiln::llm
