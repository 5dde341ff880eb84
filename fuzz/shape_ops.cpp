// Shape, stride and size validation of the op front ends. The input is a small program:
// a dtype and a storage of 0 to 64 elements, then up to 32 operations (views, creation,
// and ops that compute), each with sizes, strides, dims and indices drawn from small
// numbers and the edges where arithmetic overflows (2^31, 2^32, 2^62, 2^63 - 1, -1...).
// Every operation must either succeed or raise kiln::Error, and whatever succeeds must
// be a sound tensor:
//   - its element count is the product of its sizes (never a product that overflowed);
//   - every element it can address lies inside its storage;
//   - a small one copies out (ASan checks the reads) to a tensor of the same shape;
//   - one whose byte size cannot exist (over 2^63) refuses to be copied.
// Ops that compute run only on tensors whose sizes multiply to at most
// kMaxComputeElements (zeros counted as ones), so the work and the outputs per input stay
// bounded; a view of a trillion elements is legal and is only checked.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/index.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "kiln/tensor.h"
#include "kiln/tensor_limits.h"

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::fuzz::finding;
using kiln::fuzz::FuzzInput;

constexpr DType kDTypes[] = {DType::Float32,  DType::Float64, DType::BFloat16,  DType::Float16,
                             DType::Int64,    DType::Int32,   DType::Int8,      DType::UInt8,
                             DType::Bool,     DType::Complex64, DType::Float8_e4m3fn, DType::UInt64};

constexpr int64_t kMax = INT64_MAX;
constexpr int64_t kEdges[] = {
    -1, -2, -3, INT64_MIN, INT64_MIN + 1, kMax, kMax - 1, kMax / 2, kMax / 2 + 1, int64_t{1} << 31,
    (int64_t{1} << 31) - 1, int64_t{1} << 32, (int64_t{1} << 32) + 1, int64_t{1} << 40, int64_t{1} << 61,
    int64_t{1} << 62, (int64_t{1} << 62) + 1, 3 * (int64_t{1} << 61), INT32_MAX, INT32_MIN, 1000, 4096, 65536,
};

constexpr size_t kMaxDims = 6;
constexpr size_t kMaxOps = 32;
constexpr size_t kStackSize = 4;
constexpr int64_t kMaxComputeElements = 256;
constexpr int64_t kMaxCopyBytes = int64_t{1} << 16;

// Mostly 0..8, often an edge, sometimes any 64-bit value.
int64_t number(FuzzInput& in) {
  const uint8_t b = in.byte();
  if (b < 160) return b % 9;
  if (b < 248) return kEdges[b % std::size(kEdges)];
  return in.raw<int64_t>();
}

Shape shape(FuzzInput& in) {
  Shape out(in.below(kMaxDims + 1));
  for (auto& v : out) v = number(in);
  return out;
}

DType dtype(FuzzInput& in) { return kDTypes[in.below(std::size(kDTypes))]; }

// The element count of `sizes`, or nothing when a size is negative or the product
// overflows int64.
std::optional<int64_t> checked_numel(const Shape& sizes) {
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

std::optional<int64_t> checked_bytes(const Shape& sizes, DType dt) {
  const auto n = checked_numel(sizes);
  int64_t bytes = 0;
  if (!n || __builtin_mul_overflow(*n, static_cast<int64_t>(kiln::itemsize(dt)), &bytes)) return std::nullopt;
  return bytes;
}

std::string describe(const Tensor& t) {
  return "sizes " + kiln::shape_to_string(t.sizes()) + " strides " + kiln::shape_to_string(t.strides()) +
         " offset " + std::to_string(t.storage_offset()) + " dtype " + std::string(kiln::dtype_name(t.dtype())) +
         " storage bytes " + std::to_string(t.storage()->nbytes);
}

// The invariants every tensor an op hands out must hold.
void check_sound(const Tensor& t, const char* op) {
  const Shape& sizes = t.sizes();
  const Shape& strides = t.strides();
  if (sizes.size() != strides.size()) finding(std::string(op) + ": sizes and strides differ in length");
  if (t.dim() > kiln::kMaxTensorDims) finding(std::string(op) + " made a tensor of more than 64 dims: " + describe(t));
  const auto n = checked_numel(sizes);
  if (!n) finding(std::string(op) + " made a tensor whose element count is not an int64: " + describe(t));
  if (t.numel() != *n) finding(std::string(op) + ": numel() is not the product of the sizes: " + describe(t));
  if (*n == 0) return;
  if (t.storage_offset() < 0) finding(std::string(op) + ": negative storage offset: " + describe(t));
  __int128 lo = t.storage_offset(), hi = t.storage_offset();
  for (size_t d = 0; d < sizes.size(); ++d) {
    const __int128 span = static_cast<__int128>(sizes[d] - 1) * strides[d];
    (span < 0 ? lo : hi) += span;
  }
  const __int128 capacity = t.storage()->nbytes / kiln::itemsize(t.dtype());
  if (lo < 0 || hi >= capacity) finding(std::string(op) + " made a view reaching outside its storage: " + describe(t));
}

// Copies a small tensor out (reading every element it addresses); expects a tensor of
// impossible byte size to refuse.
void check_copies(const Tensor& t, const char* op) {
  const auto bytes = checked_bytes(t.sizes(), t.dtype());
  if (!bytes) {
    try {
      t.contiguous();
    } catch (const kiln::Error&) {
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
bool computable(const Tensor& t) {
  int64_t work = 1;
  for (const int64_t s : t.sizes()) {
    if (__builtin_mul_overflow(work, std::max<int64_t>(s, 1), &work) || work > kMaxComputeElements) return false;
  }
  return true;
}

// Runs one operation and returns its result, or nothing when it was refused (or skipped
// because it would be too much work).
std::optional<Tensor> step(FuzzInput& in, const std::array<Tensor, kStackSize>& stack, const char*& op) {
  const Tensor& a = stack[in.below(kStackSize)];
  const Tensor& b = stack[in.below(kStackSize)];
  switch (in.byte() % 24) {
    case 0:
      op = "view";
      return a.view(shape(in));
    case 1:
      op = "reshape";
      if (!computable(a)) return std::nullopt;  // may copy
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
    case 12: {
      op = "movedim";
      const int64_t d0 = number(in);
      return a.movedim(d0, number(in));
    }
    case 13: {
      op = "creation";
      const Shape sizes = shape(in);
      const DType dt = dtype(in);
      const auto bytes = checked_bytes(sizes, dt);
      if (bytes && *bytes > kMaxCopyBytes) return std::nullopt;  // legal, only big
      std::optional<Tensor> made;
      switch (in.below(3)) {
        case 0: made = kiln::empty(sizes, dt); break;
        case 1: made = kiln::zeros(sizes, dt); break;
        default: made = kiln::full(sizes, kiln::Scalar(int64_t{1}), dt); break;
      }
      if (!bytes) {
        finding("creation of " + kiln::shape_to_string(sizes) + " " + std::string(kiln::dtype_name(dt)) +
                " (a negative size, or over 2^63 bytes) succeeded");
      }
      return made;
    }
    case 14: {
      op = "arange/linspace";
      const int64_t start = number(in), end = number(in), step_or_count = number(in);
      if (in.flag()) {
        if (step_or_count == 0) return kiln::arange(kiln::Scalar(start), kiln::Scalar(end), kiln::Scalar(step_or_count));
        const long double count = (static_cast<long double>(end) - start) / step_or_count;
        if (count > kMaxComputeElements && count < 0x1p62L) return std::nullopt;  // legal, only big
        const Tensor r = kiln::arange(kiln::Scalar(start), kiln::Scalar(end), kiln::Scalar(step_or_count));
        if (count >= 0x1p62L) finding("arange of over 2^62 elements succeeded");
        return r;
      }
      if (step_or_count > kMaxComputeElements && step_or_count < (int64_t{1} << 62)) return std::nullopt;
      const Tensor r = kiln::linspace(kiln::Scalar(start), kiln::Scalar(end), step_or_count);
      if (step_or_count >= (int64_t{1} << 62)) finding("linspace of over 2^62 elements succeeded");
      return r;
    }
    case 15:
      op = "cat";
      if (!computable(a) || !computable(b)) return std::nullopt;
      return kiln::cat({a, b}, number(in));
    case 16: {
      op = "index_select";
      if (!computable(a)) return std::nullopt;
      const int64_t dim = number(in);
      Shape index_sizes(in.below(3));
      for (auto& s : index_sizes) s = in.below(5);
      const Tensor index = kiln::zeros(index_sizes, in.flag() ? DType::Int64 : DType::Int32);
      const Tensor flat = index.view({-1});
      for (int64_t i = 0; i < flat.numel(); ++i) flat.select(0, i).fill_(kiln::Scalar(number(in)));
      return kiln::index_select(a, dim, index);
    }
    case 17:
      op = "matmul";
      if (!computable(a) || !computable(b)) return std::nullopt;
      return kiln::matmul(a, b);
    case 18:
      op = "softmax";
      if (!computable(a)) return std::nullopt;
      return kiln::softmax(a, number(in));
    case 19: {
      op = "sum";
      if (!computable(a)) return std::nullopt;
      kiln::DimList dims(in.below(4));
      for (auto& d : dims) d = number(in);
      return kiln::sum(a, dims, in.flag());
    }
    case 20:
      op = "copy_";
      if (!computable(a) || !computable(b)) return std::nullopt;
      Tensor(b).copy_(a);
      return b;
    case 21:
      op = "to";
      if (!computable(a)) return std::nullopt;
      return a.to(dtype(in));
    case 22: {
      op = "stack/split";
      if (!computable(a) || !computable(b)) return std::nullopt;
      if (in.flag()) return kiln::stack({a, b}, number(in));
      const int64_t split_size = number(in);
      const auto parts = kiln::split(a, split_size, number(in));
      if (parts.size() > 1'000'000) finding("split made a million parts");
      return parts.empty() ? std::nullopt : std::optional<Tensor>(parts.back());
    }
    default: {
      op = "base";
      const Shape sizes{static_cast<int64_t>(in.below(65))};
      return kiln::zeros(sizes, dtype(in));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  std::array<Tensor, kStackSize> stack;
  stack.fill(kiln::zeros({static_cast<int64_t>(in.below(65))}, dtype(in)));
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
  return 0;
}
