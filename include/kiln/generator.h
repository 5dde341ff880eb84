// The counter-based random generator (Philox-4x32-10) every random op draws from.
#pragma once

#include <cstdint>

namespace kiln {

// The same seed and call sequence give the same numbers on every machine and thread
// count: an op reserves a range of 128-bit counters and its kernel derives element i
// from (seed, first counter + i / 4) alone.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
  uint64_t seed() const { return seed_; }
  // Reserves `n` 128-bit counters and returns the first.
  uint64_t advance(uint64_t n) { uint64_t o = offset_; offset_ += n; return o; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator random ops use when given none.
Generator& default_generator();
void manual_seed(uint64_t seed);  // torch.manual_seed

}  // namespace kiln
