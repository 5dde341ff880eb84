// The counter-based random generator (Philox-4x32-10) every random op draws from.
#pragma once

#include <atomic>
#include <cstdint>

namespace kiln {

// The same seed and call sequence give the same numbers on every machine and thread
// count: an op reserves a range of 128-bit counters and its kernel derives element i
// from (seed, first counter + i / 4) alone.
//
// Random ops on several threads may share one generator (the process default, most
// often): `advance` reserves its range atomically, so no two calls get overlapping
// counters; which thread gets which range follows the order the calls arrive in.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  // A copy continues from where `other` stands (seed and counter).
  Generator(const Generator& other) : seed_(other.seed()), offset_(other.offset()) {}
  Generator& operator=(const Generator& other) {
    seed_.store(other.seed(), std::memory_order_relaxed);
    offset_.store(other.offset(), std::memory_order_relaxed);
    return *this;
  }

  void manual_seed(uint64_t seed) {
    seed_.store(seed, std::memory_order_relaxed);
    offset_.store(0, std::memory_order_relaxed);
  }
  uint64_t seed() const { return seed_.load(std::memory_order_relaxed); }
  // The first counter the next call to advance() reserves.
  uint64_t offset() const { return offset_.load(std::memory_order_relaxed); }
  // Reserves `n` 128-bit counters and returns the first.
  uint64_t advance(uint64_t n) { return offset_.fetch_add(n, std::memory_order_relaxed); }

 private:
  // Atomic so that concurrent random ops never read a torn value or reserve the same
  // counters twice; relaxed, because the counters themselves are the only data shared.
  std::atomic<uint64_t> seed_;
  std::atomic<uint64_t> offset_{0};
};

// The process-wide generator random ops use when given none.
Generator& default_generator();
void manual_seed(uint64_t seed);  // torch.manual_seed

}  // namespace kiln
