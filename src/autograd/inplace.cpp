// In-place ops under autograd (PyTorch's rebase_history and CopySlices).
//
// An in-place op on a tensor that takes part in autograd runs as: a recorded copy of
// self's old value, the out-of-place op on that copy, recorded, then the in-place op
// itself with recording off (so its checks, errors and values are the op's own); the
// recorded node becomes self's history. It saves the copy, not self, so the write does
// not invalidate it, while nodes that saved self itself see its version move and raise
// at backward, as in PyTorch.
//
// A view recorded while its base required grad remembers its root (AutogradMeta::
// view_base). An in-place op on it gives the root a CopySlices node (the root's old
// history outside the view's elements, the op's result inside them) and the view a node
// that reads its elements back out of the root's gradient.
#include <cctype>
#include <string>

#include "autograd/formula_util.h"
#include "autograd/function.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;

// "add_" -> "AddBackward0": the name of the node recorded for an in-place op whose result
// does not depend on self's old value (fill_, copy_ of a constant).
std::string zero_node_name(const char* op) {
  std::string name;
  bool upper = true;
  for (const char* p = op; *p != '\0'; ++p) {
    if (*p == '_') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(*p))) : *p;
    upper = false;
  }
  return name + "Backward0";
}

// Does t cover its whole storage (so nothing else can view part of it unnoticed)?
bool covers_storage(const Tensor& t) {
  return t.storage_offset() == 0 && t.nbytes() == t.storage()->nbytes;
}

// Places a tensor in a fresh buffer laid out like `storage_like`'s storage, so the view's
// and the base's geometries index the same elements (any strides, any offset).
Tensor storage_buffer(const Tensor& storage_like, DType dtype) {
  const int64_t elements = static_cast<int64_t>(storage_like.storage()->nbytes / storage_like.element_size());
  return zeros({elements}, dtype);
}
Tensor with_geometry(const Tensor& buffer, const Tensor& geometry) {
  return buffer.as_strided(geometry.sizes(), geometry.strides(), geometry.storage_offset());
}

void refuse_create_graph(const Tensor& g) {
  KILN_CHECK_KIND(!(GradMode::is_enabled() && g.requires_grad()), NotImplemented, "backward",
                  "double backward through an in-place op on a view is not implemented in kiln's autograd "
                  "(create_graph=True); use the out-of-place op");
}

// A node with the given inputs whose single output is the existing tensor `out`.
std::shared_ptr<FormulaNode> attach_node(const char* name, const std::vector<Tensor>& inputs, const Tensor& out,
                                         BackwardFn backward) {
  auto node = std::make_shared<FormulaNode>(name, std::move(backward));
  for (const Tensor& t : inputs) {
    node->next_edges_.push_back(gradient_edge(t));
    node->inputs_.push_back({t.sizes(), t.dtype()});
  }
  node->outputs_.push_back({out.sizes(), out.dtype()});
  return node;
}

void set_history(const Tensor& t, std::shared_ptr<Node> node, uint32_t output_nr) {
  auto& impl = t.unsafe_impl();
  if (impl->autograd == nullptr) impl->autograd = std::make_shared<AutogradMeta>();
  impl->autograd->grad_fn = std::move(node);
  impl->autograd->output_nr = output_nr;
}

// self is a view of `base` whose elements now hold `result`'s values.
void rebase_view(const Tensor& self, const Tensor& base, const Tensor& result) {
  // Geometries only: the nodes must not keep the tensors (their data) alive.
  const Tensor base_geometry = base.detach(), view_geometry = self.detach();
  auto copy_slices = attach_node("CopySlices", {base, result}, base, [base_geometry, view_geometry](BackwardContext& c) {
    refuse_create_graph(c.grad());
    Tensor buffer = storage_buffer(base_geometry, c.grad().dtype());
    Tensor in_base = with_geometry(buffer, base_geometry);
    in_base.copy_(c.grad());
    Tensor region = with_geometry(buffer, view_geometry);
    Tensor g_result = c.needs[1] ? region.clone() : Tensor();
    region.zero_();
    return Grads{c.needs[0] ? in_base.clone() : Tensor(), g_result};
  });
  set_history(base, copy_slices, 0);
  auto view_node = attach_node("AsStridedBackward0", {base}, self, [base_geometry, view_geometry](BackwardContext& c) {
    refuse_create_graph(c.grad());
    Tensor buffer = storage_buffer(base_geometry, c.grad().dtype());
    with_geometry(buffer, view_geometry).copy_(c.grad());
    return Grads{with_geometry(buffer, base_geometry).clone()};
  });
  set_history(self, view_node, 0);
}

void inplace_entry(const Tensor& self, const char* op, const std::function<void()>& in_place,
                   const std::function<Tensor(const Tensor&)>& out_of_place) {
  const AutogradMeta* meta = self.autograd_meta();
  const Tensor base = meta != nullptr ? meta->view_base : Tensor();
  if (self.requires_grad()) {
    KILN_CHECK(!self.is_leaf(), op, "a leaf Variable that requires grad is being used in an in-place operation.");
    KILN_CHECK(!(base.defined() && base.is_leaf()), op,
               "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  }
  // A view taken while its base did not require grad cannot rebase that base: refuse
  // rather than give the base a silently missing gradient.
  KILN_CHECK_KIND(base.defined() || covers_storage(self), NotImplemented, op,
                  "writing a tensor that requires grad in place into a view (or a part of a larger tensor) that was "
                  "taken while its base did not require grad is not recorded by kiln's autograd; build the result "
                  "out of place (cat, where, index ops) instead");
  const Tensor old_value = self.clone();  // recorded: CloneBackward0 to self's old history
  // Recorded before the write: a saved operand that aliases self (x.mul_(x.detach())) is
  // saved at its old version, so the write makes backward raise, as in PyTorch.
  Tensor result = out_of_place(old_value);
  {
    NoGradGuard no_grad;
    in_place();
  }
  if (!result.defined() || !result.requires_grad()) {
    if (!old_value.requires_grad()) return;  // nothing to record (a constant written into a constant)
    // The new value does not depend on the old one: its gradient is zero.
    result = record(zero_node_name(op).c_str(), {old_value}, self.detach(), {},
                    [](BackwardContext& c) { return Grads{zeros_of(c.grad())}; });
  }
  if (result.dtype() != self.dtype()) result = result.to(self.dtype());
  KILN_CHECK(result.sizes() == self.sizes(), op, "internal: the recorded result has shape {}, self {}",
             result.shape_str(), self.shape_str());
  if (base.defined()) {
    rebase_view(self, base, result);
    return;
  }
  const AutogradMeta* result_meta = result.autograd_meta();
  set_history(self, result_meta->grad_fn, result_meta->output_nr);
}

const bool installed = [] {
  autograd_hooks::tensor_method_hooks().inplace = inplace_entry;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
