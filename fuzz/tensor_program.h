// What the tensor harnesses (shape_ops, index_ops) share: drawing sizes, strides, dims
// and dtypes from small numbers and the edges where arithmetic overflows, the view ops
// that turn one tensor into another without computing, and the invariants every tensor
// an op hands out must hold.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz_input.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "kiln/tensor_limits.h"

namespace kiln::fuzz {

inline constexpr DType kDTypes[] = {DType::Float32, DType::Float64,   DType::BFloat16,      DType::Float16,
                                    DType::Int64,   DType::Int32,     DType::Int8,          DType::UInt8,
                                    DType::Bool,    DType::Complex64, DType::Float8_e4m3fn, DType::UInt64};

inline constexpr int64_t kMax = INT64_MAX;
inline constexpr int64_t kEdges[] = {
    -1, -2, -3, INT64_MIN, INT64_MIN + 1, kMax, kMax - 1, kMax / 2, kMax / 2 + 1, int64_t{1} << 31,
    (int64_t{1} << 31) - 1, int64_t{1} << 32, (int64_t{1} << 32) + 1, int64_t{1} << 40, int64_t{1} << 61,
    int64_t{1} << 62, (int64_t{1} << 62) + 1, 3 * (int64_t{1} << 61), INT32_MAX, INT32_MIN, 1000, 4096, 65536,
};

inline constexpr size_t kMaxDims = 6;
inline constexpr int64_t kMaxComputeElements = 256;
inline constexpr int64_t kMaxCopyBytes = int64_t{1} << 16;

// Mostly 0..8, often an edge, sometimes any 64-bit value.
inline int64_t number(FuzzInput& in) {
  const uint8_t b = in.byte();
  if (b < 160) return b % 9;
  if (b < 248) return kEdges[b % std::size(kEdges)];
  return in.raw<int64_t>();
}

inline Shape shape(FuzzInput& in) {
  Shape out(in.below(kMaxDims + 1));
  for (auto& v : out) v = number(in);
  return out;
}

inline DType dtype(FuzzInput& in) { return kDTypes[in.below(std::size(kDTypes))]; }

// The element count of `sizes`, or nothing when a size is negative or the product
// overflows int64.
inline std::optional<int64_t> checked_numel(const Shape& sizes) {
  int64_t n = 1;
  bool overflow = false;
  for (const int64_t s : sizes) {
    if (s < 0) return std::nullopt;
    overflow |= __builtin_mul_overflow(n, s, &n);
  }
  // A zero size makes the product 0 however large the others are.
  for (const int64_t s : sizes) {
    if (s == 0) return 0;
  }
  return overflow ? std::nullopt : std::optional<int64_t>(n);
}

inline std::optional<int64_t> checked_bytes(const Shape& sizes, DType dt) {
  const auto n = checked_numel(sizes);
  int64_t bytes = 0;
  if (!n || __builtin_mul_overflow(*n, static_cast<int64_t>(itemsize(dt)), &bytes)) return std::nullopt;
  return bytes;
}

inline std::string describe(const Tensor& t) {
  return "sizes " + shape_to_string(t.sizes()) + " strides " + shape_to_string(t.strides()) + " offset " +
         std::to_string(t.storage_offset()) + " dtype " + std::string(dtype_name(t.dtype())) + " storage bytes " +
         std::to_string(t.storage()->nbytes);
}

// The invariants every tensor an op hands out must hold.
inline void check_sound(const Tensor& t, const char* op) {
  const Shape& sizes = t.sizes();
  const Shape& strides = t.strides();
  if (sizes.size() != strides.size()) finding(std::string(op) + ": sizes and strides differ in length");
  if (t.dim() > kMaxTensorDims) finding(std::string(op) + " made a tensor of more than 64 dims: " + describe(t));
  const auto n = checked_numel(sizes);
  if (!n) finding(std::string(op) + " made a tensor whose element count is not an int64: " + describe(t));
  if (t.numel() != *n) finding(std::string(op) + ": numel() is not the product of the sizes: " + describe(t));
  int64_t offset_bytes = 0;
  if (__builtin_mul_overflow(t.storage_offset(), static_cast<int64_t>(itemsize(t.dtype())), &offset_bytes)) {
    finding(std::string(op) + " made a tensor whose storage offset in bytes overflows int64: " + describe(t));
  }
  if (*n == 0) return;
  if (t.storage_offset() < 0) finding(std::string(op) + ": negative storage offset: " + describe(t));
  __int128 lo = t.storage_offset(), hi = t.storage_offset();
  for (size_t d = 0; d < sizes.size(); ++d) {
    const __int128 span = static_cast<__int128>(sizes[d] - 1) * strides[d];
    (span < 0 ? lo : hi) += span;
  }
  const __int128 capacity = t.storage()->nbytes / itemsize(t.dtype());
  if (lo < 0 || hi >= capacity) finding(std::string(op) + " made a view reaching outside its storage: " + describe(t));
}

// Copies a small tensor out (reading every element it addresses); expects a tensor of
// impossible byte size to refuse.
inline void check_copies(const Tensor& t, const char* op) {
  const auto bytes = checked_bytes(t.sizes(), t.dtype());
  if (!bytes) {
    try {
      t.contiguous();
    } catch (const Error&) {
      return;
    }
    finding(std::string(op) + ": a tensor of more than 2^63 bytes was copied: " + describe(t));
  }
  if (*bytes > kMaxCopyBytes || t.is_contiguous()) return;
  const Tensor copy = t.contiguous();
  if (copy.sizes() != t.sizes() || !copy.is_contiguous()) finding(std::string(op) + ": contiguous() changed the shape");
}

// Small enough to compute on: the product of the sizes, zeros counted as ones, bounds
// every output (a sum over the 0 of [0, 2^40] is 2^40 elements) and every part count.
inline bool computable(const Tensor& t) {
  int64_t work = 1;
  for (const int64_t s : t.sizes()) {
    if (__builtin_mul_overflow(work, std::max<int64_t>(s, 1), &work) || work > kMaxComputeElements) return false;
  }
  return true;
}

// How many view ops view_op knows.
inline constexpr int kViewOps = 13;

// View op `which` (0 to kViewOps - 1) of `a`, with its arguments read from `in`; nothing
// when it would be too much work (reshape may copy).
inline std::optional<Tensor> view_op(int which, FuzzInput& in, const Tensor& a, const char*& op) {
  switch (which) {
    case 0:
      op = "view";
      return a.view(shape(in));
    case 1:
      op = "reshape";
      if (!computable(a)) return std::nullopt;
      return a.reshape(shape(in));
    case 2:
      op = "expand";
      return a.expand(shape(in));
    case 3: {
      op = "as_strided";
      const Shape sizes = shape(in);
      Shape strides(in.flag() ? sizes.size() : in.below(kMaxDims + 1));
      for (auto& s : strides) s = number(in);
      return in.flag() ? a.as_strided(sizes, strides) : a.as_strided(sizes, strides, number(in));
    }
    case 4: {
      op = "from_storage";
      const Shape sizes = shape(in);
      Shape strides(sizes.size());
      for (auto& s : strides) s = number(in);
      return Tensor::from_storage(a.storage(), sizes, strides, number(in), dtype(in));
    }
    case 5: {
      op = "narrow";
      const int64_t dim = number(in), start = number(in);
      return a.narrow(dim, start, number(in));
    }
    case 6: {
      op = "slice";
      const int64_t dim = number(in);
      const std::optional<int64_t> start = in.flag() ? std::optional<int64_t>(number(in)) : std::nullopt;
      const std::optional<int64_t> end = in.flag() ? std::optional<int64_t>(number(in)) : std::nullopt;
      return a.slice(dim, start, end, number(in));
    }
    case 7: {
      op = "select";
      const int64_t dim = number(in);
      return a.select(dim, number(in));
    }
    case 8:
      op = "permute";
      return a.permute(shape(in));
    case 9: {
      op = "transpose";
      const int64_t d0 = number(in);
      return a.transpose(d0, number(in));
    }
    case 10:
      op = "squeeze/unsqueeze";
      return in.flag() ? a.squeeze(number(in)) : a.unsqueeze(number(in));
    case 11: {
      op = "flatten/unflatten";
      const int64_t d0 = number(in);
      if (in.flag()) return a.flatten(d0, number(in));
      return a.unflatten(d0, shape(in));
    }
    default: {
      op = "movedim";
      const int64_t d0 = number(in);
      return a.movedim(d0, number(in));
    }
  }
}

// Runs the program: up to kMaxOps steps, each `step(in, stack, op)` picking its operands
// from the stack. A step the library refuses is skipped; every result must be sound and
// copy out, then replaces a slot of the stack.
template <size_t kMaxOps, size_t kStackSize, typename Step>
void run_program(FuzzInput& in, std::array<Tensor, kStackSize>& stack, Step&& step) {
  for (size_t i = 0; i < kMaxOps && !in.empty(); ++i) {
    const char* op = "?";
    std::optional<Tensor> result;
    try {
      result = step(in, stack, op);
    } catch (const kiln::Error&) {
      continue;
    }
    if (!result) continue;
    check_sound(*result, op);
    check_copies(*result, op);
    stack[in.below(kStackSize)] = *result;
  }
}

}  // namespace kiln::fuzz
