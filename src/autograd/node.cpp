// Nodes, saved tensors and recording (autograd/function.h).
#include <atomic>
#include <mutex>

#include <fmt/core.h>

#include "autograd/function.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"

namespace kiln::autograd {

namespace {

std::atomic<uint64_t> next_sequence_nr{0};
// Guards the creation of leaves' gradient accumulators: two threads recording ops on the
// same leaf must share one (PyTorch locks here too).
std::mutex accumulator_mutex;

// A new handle on t's data with no autograd state, so the node can carry it.
Tensor fresh_alias(const Tensor& t) { return t.detach(); }

std::string describe_saved(const Tensor& t) { return fmt::format("[{} {}]", dtype_name(t.dtype()), t.shape_str()); }

}  // namespace

Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(next_sequence_nr.fetch_add(1)) {}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  const AutogradMeta* meta = t.defined() ? t.autograd_meta() : nullptr;
  return meta != nullptr ? meta->grad_fn : nullptr;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  AutogradMeta* meta = t.autograd_meta();
  if (meta->grad_fn != nullptr) return {meta->grad_fn, meta->output_nr};
  std::lock_guard<std::mutex> lock(accumulator_mutex);
  std::shared_ptr<Node> acc = meta->grad_accumulator.lock();
  if (acc == nullptr) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta->grad_accumulator = acc;
  }
  return {acc, 0};
}

// ---------------------------------------------------------------- saved tensors

SavedTensor::SavedTensor(const Tensor& t, bool is_output, const std::shared_ptr<Node>& node, uint32_t output_nr)
    : version_(t.defined() ? static_cast<uint64_t>(t.version()) : 0), is_output_(is_output), output_nr_(output_nr) {
  if (!t.defined()) return;
  if (is_output) {
    tensor_ = fresh_alias(t);
    node_ = node;
  } else {
    tensor_ = t;
  }
}

Tensor SavedTensor::unpack(const Node& owner) const {
  if (!tensor_.defined()) return tensor_;
  const auto now = static_cast<uint64_t>(tensor_.version());
  if (now != version_) {
    const std::string which = is_output_ ? fmt::format("output {} of {}", output_nr_, owner.name())
                                         : fmt::format("an input of {}", owner.name());
    fail(ErrorKind::Runtime, "backward",
         "one of the variables needed for gradient computation has been modified by an inplace operation: {}, "
         "which is {}, is at version {}; expected version {} instead. Hint: the in-place op ran after the "
         "forward op saved the tensor; use an out-of-place op or clone() first.",
         describe_saved(tensor_), which, now, version_);
  }
  if (!is_output_) return tensor_;
  Tensor out = fresh_alias(tensor_);
  if (auto node = node_.lock()) {
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = std::move(node);
    meta->output_nr = output_nr_;
    out.unsafe_impl()->autograd = std::move(meta);
  }
  return out;
}

// ---------------------------------------------------------------- formula nodes

std::vector<Tensor> FormulaNode::apply(std::vector<Tensor>&& grads) {
  if (released_ && !saved_.empty()) {
    fail(ErrorKind::Runtime, "backward",
         "Trying to backward through the graph a second time (or directly access saved tensors after they have "
         "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
         "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
         "if you need to access saved tensors after calling backward. (node {})", name());
  }
  BackwardContext ctx;
  ctx.grads = std::move(grads);
  for (size_t i = 0; i < ctx.grads.size(); ++i) {
    if (!ctx.grads[i].defined()) ctx.grads[i] = zeros(outputs_[i].sizes, outputs_[i].dtype);
  }
  ctx.saved.reserve(saved_.size());
  for (const SavedTensor& s : saved_) ctx.saved.push_back(s.unpack(*this));
  ctx.needs.reserve(next_edges_.size());
  for (const Edge& e : next_edges_) ctx.needs.push_back(e.valid());
  std::vector<Tensor> result = fn_(ctx);
  KILN_CHECK(result.size() == next_edges_.size(), "backward", "{} returned {} gradients for {} inputs", name(),
             result.size(), next_edges_.size());
  return result;
}

void FormulaNode::release_saved() {
  if (saved_.empty()) return;
  // Keep the count so apply can tell "freed" from "never saved anything".
  for (SavedTensor& s : saved_) s = SavedTensor();
  released_ = true;
}

// ---------------------------------------------------------------- leaves

AccumulateGrad::AccumulateGrad(Tensor leaf) : Node("AccumulateGrad"), leaf_(std::move(leaf)) {
  inputs_ = {};
  outputs_ = {{leaf_.sizes(), leaf_.dtype()}};
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g.defined()) return {};
  auto& impl = leaf_.unsafe_impl();
  if (impl->autograd == nullptr) impl->autograd = std::make_shared<AutogradMeta>();
  Tensor& acc = impl->autograd->grad;
  if (GradMode::is_enabled()) {
    // create_graph: the gradient keeps its own graph, so accumulate out of place.
    acc = acc.defined() ? add(acc, g) : g;
  } else if (!acc.defined()) {
    // A gradient may be shared (add passes one tensor to both inputs) or expanded (sum
    // passes a stride-0 view): the leaf gets its own contiguous copy to add into later.
    acc = g.clone();
  } else {
    add_(acc, g);
  }
  return {};
}

// ---------------------------------------------------------------- recording

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor*> outputs,
            std::vector<Save> saved, BackwardFn backward) {
  if (!GradMode::is_enabled() || !any_requires_grad(inputs)) return;
  auto node = std::make_shared<FormulaNode>(name, std::move(backward));
  node->next_edges_.reserve(inputs.size());
  node->inputs_.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    node->next_edges_.push_back(gradient_edge(t));
    node->inputs_.push_back(t.defined() ? GradGeometry{t.sizes(), t.dtype()} : GradGeometry{});
  }
  for (const Tensor* out : outputs) node->outputs_.push_back({out->sizes(), out->dtype()});
  // Saved inputs first (before the outputs get their node), then the outputs.
  node->saved_.resize(saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    if (saved[i].output < 0) node->saved_[i] = SavedTensor(saved[i].tensor, false, nullptr, 0);
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& out = *outputs[k];
    if (!out.defined() || !(is_floating(out.dtype()) || is_complex(out.dtype()))) continue;
    out = fresh_alias(out);  // never attach the node to a tensor the caller also holds
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = node;
    meta->output_nr = static_cast<uint32_t>(k);
    out.unsafe_impl()->autograd = std::move(meta);
  }
  for (size_t i = 0; i < saved.size(); ++i) {
    if (saved[i].output >= 0) {
      const auto k = static_cast<size_t>(saved[i].output);
      node->saved_[i] = SavedTensor(*outputs[k], true, node, static_cast<uint32_t>(k));
    }
  }
}

Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output, std::vector<Save> saved,
              BackwardFn backward) {
  record(name, inputs, std::vector<Tensor*>{&output}, std::move(saved), std::move(backward));
  return output;
}

}  // namespace kiln::autograd
