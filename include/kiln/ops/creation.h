// Tensor creation: torch.empty/zeros/ones/full/arange/linspace/eye and the seeded
// random generators (rand, randn, randint).
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln {

Tensor empty(const Shape& sizes, DType dtype = DType::Float32);
Tensor empty_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor zeros(const Shape& sizes, DType dtype = DType::Float32);
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor ones(const Shape& sizes, DType dtype = DType::Float32);
Tensor ones_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
// dtype defaults to the scalar's own: bool, int64, float32 or complex64 (torch.full).
Tensor full(const Shape& sizes, const Scalar& value, std::optional<DType> dtype = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& value, std::optional<DType> dtype = std::nullopt);
// A 0-dim tensor holding `value` (dtype defaults as in full).
Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype = std::nullopt);

// torch.arange: int64 when start, end and step are all integral, else float32.
Tensor arange(const Scalar& end, std::optional<DType> dtype = std::nullopt);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = Scalar(int64_t{1}),
              std::optional<DType> dtype = std::nullopt);
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, std::optional<DType> dtype = std::nullopt);
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = DType::Float32);

// A counter-based generator (Philox-4x32-10): the same seed and call sequence give
// the same numbers on every machine and thread count.
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

Generator& default_generator();
void manual_seed(uint64_t seed);  // torch.manual_seed

// Uniform on [0, 1).
Tensor rand(const Shape& sizes, DType dtype = DType::Float32, Generator* gen = nullptr);
// Standard normal.
Tensor randn(const Shape& sizes, DType dtype = DType::Float32, Generator* gen = nullptr);
// Uniform integers on [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype = DType::Int64, Generator* gen = nullptr);

}  // namespace kiln
