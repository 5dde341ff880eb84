// Tensor creation: torch.empty/zeros/ones/full/arange/linspace/eye and the seeded
// random ops (rand, randn, randint) on kiln/generator.h.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/generator.h"
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
// The *_like ops in a memory format: Preserve (PyTorch's default there) keeps a dense
// input's strides and the dim order of any other; ChannelsLast / ChannelsLast3d need a
// 4-D / 5-D input. The overloads above without one give row-major memory.
Tensor empty_like(const Tensor& t, MemoryFormat memory_format, std::optional<DType> dtype = std::nullopt);
Tensor zeros_like(const Tensor& t, MemoryFormat memory_format, std::optional<DType> dtype = std::nullopt);
Tensor ones_like(const Tensor& t, MemoryFormat memory_format, std::optional<DType> dtype = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& value, MemoryFormat memory_format,
                 std::optional<DType> dtype = std::nullopt);
// A 0-dim tensor holding `value` (dtype defaults as in full).
Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype = std::nullopt);

// torch.arange: int64 when start, end and step are all integral, else float32.
Tensor arange(const Scalar& end, std::optional<DType> dtype = std::nullopt);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = Scalar(int64_t{1}),
              std::optional<DType> dtype = std::nullopt);
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, std::optional<DType> dtype = std::nullopt);
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = DType::Float32);

// Uniform on [0, 1).
Tensor rand(const Shape& sizes, DType dtype = DType::Float32, Generator* gen = nullptr);
// Standard normal.
Tensor randn(const Shape& sizes, DType dtype = DType::Float32, Generator* gen = nullptr);
// Uniform integers on [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype = DType::Int64, Generator* gen = nullptr);

}  // namespace kiln
