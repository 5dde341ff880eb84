// Next-token choice from a row of logits: greedy, or temperature / top-k / top-p /
// min-p sampling with a repetition penalty, reproducible from a seed (the semantics of
// Hugging Face's logits processors, applied in their order: repetition penalty,
// temperature, top-k, top-p, min-p).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "kiln/llm.h"  // SamplingParams

namespace kiln::llm {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);  // bad values: Value error
  // history: prompt and generated ids so far (for the repetition penalty).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> work_;         // the logits row as the processors change it
  std::vector<int32_t> order_;      // ids still in the running
  std::vector<float> scratch_;      // top-k selection
  std::vector<uint8_t> penalized_;  // per id: repetition penalty already applied this step
};

}  // namespace kiln::llm
