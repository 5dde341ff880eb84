// The core side of autograd (internal; docs/autograd.md): the metadata a tensor that
// takes part in autograd carries, and the hook table through which the differentiable
// Tensor methods (views, clone, to) hand over to the autograd layer above the ops.
//
// Core knows nothing of graphs: grad_fn points to a node the autograd layer defines,
// and the hooks are installed by that layer at start-up (like a kernel table).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "kiln/grad_mode.h"
#include "kiln/tensor.h"

namespace kiln {

namespace autograd {
class Node;
}

struct AutogradMeta {
  // Leaves: set by requires_grad_. A tensor with a grad_fn requires grad whatever this says.
  bool requires_grad = false;
  Tensor grad;
  // The node that produced this tensor (null for leaves) and which of its outputs it is.
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  // A leaf's gradient accumulator, shared by every edge into it while a graph lives.
  std::weak_ptr<autograd::Node> grad_accumulator;
  // Views recorded while their base required grad: the root tensor they view (never a
  // view itself), so an in-place op on the view can rebase the root's history too
  // (PyTorch's CopySlices). Undefined for tensors that are not such views.
  Tensor view_base;
};

namespace autograd_hooks {

// The full test behind the inline pointer test: grad mode on and the tensor requires grad.
bool records(const Tensor& t);

// The differentiable Tensor methods that create new tensors. Derived methods reach these
// (reshape = view or clone + view, flatten/unflatten = reshape/view, movedim = permute,
// t = transpose, contiguous = clone), so they are recorded too.
struct TensorMethodHooks {
  Tensor (*view)(const Tensor& self, const Shape& sizes) = nullptr;
  Tensor (*permute)(const Tensor& self, const Shape& dims) = nullptr;
  Tensor (*transpose)(const Tensor& self, int64_t d0, int64_t d1) = nullptr;
  Tensor (*expand)(const Tensor& self, const Shape& sizes) = nullptr;
  Tensor (*narrow)(const Tensor& self, int64_t dim, int64_t start, int64_t length) = nullptr;
  Tensor (*slice)(const Tensor& self, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                  int64_t step) = nullptr;
  Tensor (*select)(const Tensor& self, int64_t dim, int64_t index) = nullptr;
  Tensor (*squeeze_all)(const Tensor& self) = nullptr;
  Tensor (*squeeze)(const Tensor& self, int64_t dim) = nullptr;
  Tensor (*unsqueeze)(const Tensor& self, int64_t dim) = nullptr;
  Tensor (*as_strided)(const Tensor& self, const Shape& sizes, const Shape& strides,
                       std::optional<int64_t> offset) = nullptr;
  Tensor (*clone)(const Tensor& self) = nullptr;
  Tensor (*to)(const Tensor& self, DType dtype) = nullptr;
  // In-place ops (PyTorch's rebase_history): records out_of_place(a recorded copy of
  // self's old value), runs in_place() with recording off and makes the recorded node
  // self's history (and, for a view, its base's).
  void (*inplace)(const Tensor& self, const char* op, const std::function<void()>& in_place,
                  const std::function<Tensor(const Tensor&)>& out_of_place) = nullptr;
};
TensorMethodHooks& tensor_method_hooks();

// Whether an in-place write of self (reading `source`, when given) must be recorded:
// grad mode is on and self or the source requires grad.
inline bool inplace_records(const Tensor& self, const Tensor* source = nullptr) {
  const bool candidate = self.has_autograd_meta() || (source != nullptr && source->defined() &&
                                                      source->has_autograd_meta());
  return candidate && GradMode::is_enabled() &&
         (self.requires_grad() || (source != nullptr && source->defined() && source->requires_grad()));
}

// A NotImplemented error: `op` was asked to record but has no backward formula.
[[noreturn]] void no_formula(const char* op);

template <typename Fn>
Fn installed(Fn fn, const char* op) {
  if (fn == nullptr) no_formula(op);
  return fn;
}

}  // namespace autograd_hooks

// The first line of an in-place op that autograd can record: when inplace_records says
// so, hands over to the inplace hook (in_place and out_of_place are lambdas) and returns
// self. Otherwise the op runs as if autograd did not exist.
#define KILN_INPLACE_AUTOGRAD(op, self, source, in_place, out_of_place)                                    \
  do {                                                                                                     \
    if (::kiln::autograd_hooks::inplace_records(self, source)) [[unlikely]] {                              \
      ::kiln::autograd_hooks::installed(::kiln::autograd_hooks::tensor_method_hooks().inplace, op)(        \
          self, op, in_place, out_of_place);                                                               \
      return self;                                                                                         \
    }                                                                                                      \
  } while (0)

// The first line of a differentiable Tensor method: when `self` records, the autograd
// layer computes the method (with recording off) and records it.
#define KILN_TENSOR_METHOD_AUTOGRAD(slot, ...)                                                      \
  do {                                                                                              \
    if (has_autograd_meta() && ::kiln::autograd_hooks::records(*this)) [[unlikely]]                 \
      return ::kiln::autograd_hooks::installed(::kiln::autograd_hooks::tensor_method_hooks().slot, \
                                               #slot)(*this __VA_OPT__(, ) __VA_ARGS__);           \
  } while (0)

}  // namespace kiln
