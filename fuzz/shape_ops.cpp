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

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/index.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "kiln/tensor.h"
#include "tensor_program.h"

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using namespace kiln::fuzz;

constexpr size_t kMaxOps = 32;
constexpr size_t kStackSize = 4;

// Runs one operation and returns its result, or nothing when it was refused (or skipped
// because it would be too much work).
std::optional<Tensor> step(FuzzInput& in, const std::array<Tensor, kStackSize>& stack, const char*& op) {
  const Tensor& a = stack[in.below(kStackSize)];
  const Tensor& b = stack[in.below(kStackSize)];
  // 0 to 12: the view ops (the numbering the committed seeds were written for).
  static_assert(kViewOps == 13);
  const int kind = in.byte() % 24;
  if (kind < kViewOps) return view_op(kind, in, a, op);
  switch (kind) {
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
  run_program<kMaxOps>(in, stack, step);
  return 0;
}
