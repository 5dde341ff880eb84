// The backward engine: runs the recorded nodes from the outputs to the leaves.
//
// Single-threaded, on the calling thread. Nodes run once every node that feeds them
// has run (dependency counts), the most recently created first among the ready ones,
// which is PyTorch's order for one device. Gradients arriving at the same input are
// summed; each returned gradient is checked against the input it belongs to (a
// broadcast gradient is summed back to the input's shape, a complex gradient of a real
// input keeps its real part, other dtypes are converted).
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/formula_util.h"
#include "autograd/function.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"

namespace kiln::autograd {

namespace {

struct CaptureTarget {
  Node* node;
  uint32_t input_nr;
};

Tensor validated(const Node& node, size_t index, Tensor g) {
  const GradGeometry& want = node.inputs_[index];
  if (g.sizes() != want.sizes) {
    KILN_CHECK(is_expandable_to(want.sizes, g.sizes()), "backward",
               "Function {} returned an invalid gradient at index {} - got {} but expected shape compatible with {}",
               node.name(), index, g.shape_str(), shape_to_string(want.sizes));
    g = sum_to(g, want.sizes);
  }
  if (g.dtype() != want.dtype) {
    if (is_complex(g.dtype()) && !is_complex(want.dtype)) g = real_part(g);
    if (g.dtype() != want.dtype) g = g.to(want.dtype);
  }
  return g;
}

void accumulate_into(Tensor& slot, const Tensor& g) {
  slot = slot.defined() ? add(slot, g) : g;
}

struct GraphTask {
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_set<Node*> needed;  // capture mode: nodes on a path to a target
  std::unordered_map<Node*, std::shared_ptr<Node>> owners;
};

// Every node reachable from the roots (each once), in discovery order.
std::vector<Node*> reachable(const std::vector<Edge>& roots, GraphTask& task) {
  std::vector<Node*> order, stack;
  for (const Edge& e : roots) {
    if (e.valid() && task.owners.emplace(e.function.get(), e.function).second) stack.push_back(e.function.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Edge& e : n->next_edges()) {
      if (e.valid() && task.owners.emplace(e.function.get(), e.function).second) stack.push_back(e.function.get());
    }
  }
  return order;
}

// Marks the nodes from which a target can be reached (and the targets).
void mark_needed(const std::vector<Node*>& nodes, const std::vector<CaptureTarget>& targets, GraphTask& task) {
  for (const CaptureTarget& t : targets) task.needed.insert(t.node);
  // Fixed point over the reachable set; graphs here are small enough for a simple sweep
  // in reverse discovery order, repeated until nothing changes.
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node* n = *it;
      if (task.needed.count(n)) continue;
      for (const Edge& e : n->next_edges()) {
        if (e.valid() && task.needed.count(e.function.get())) {
          task.needed.insert(n);
          changed = true;
          break;
        }
      }
    }
  }
}

std::vector<Tensor> run(const std::vector<Edge>& roots, std::vector<Tensor> root_grads, bool keep_graph,
                        bool create_graph, const std::vector<CaptureTarget>& targets, bool accumulate) {
  GraphTask task;
  const std::vector<Node*> nodes = reachable(roots, task);
  const bool capture = !targets.empty() && !accumulate;
  if (!targets.empty()) mark_needed(nodes, targets, task);
  const auto is_needed = [&](Node* n) { return targets.empty() || task.needed.count(n) > 0; };

  for (Node* n : nodes) {
    if (!is_needed(n)) continue;
    for (const Edge& e : n->next_edges()) {
      if (e.valid() && is_needed(e.function.get())) ++task.dependencies[e.function.get()];
    }
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    Node* n = roots[i].function.get();
    auto& buffer = task.buffers[n];
    buffer.resize(n->num_outputs());
    accumulate_into(buffer[roots[i].input_nr], root_grads[i]);
  }

  std::vector<Tensor> captured(targets.size());
  const auto later_first = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  for (const Edge& e : roots) {
    Node* n = e.function.get();
    if (is_needed(n) && task.dependencies[n] == 0) {
      task.dependencies[n] = -1;  // queued once
      ready.push(n);
    }
  }

  AutoGradMode mode(create_graph);
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(task.buffers[node]);
    grads.resize(node->num_outputs());
    task.buffers.erase(node);
    bool is_target = false;
    for (size_t t = 0; t < targets.size(); ++t) {
      if (targets[t].node == node) {
        is_target = true;
        if (grads[targets[t].input_nr].defined()) accumulate_into(captured[t], grads[targets[t].input_nr]);
      }
    }
    // In capture mode a target runs only when it also leads to another target, and a
    // leaf's accumulator never runs (grad() does not touch .grad).
    bool leads_on = false;
    for (const Edge& e : node->next_edges()) leads_on = leads_on || (e.valid() && is_needed(e.function.get()));
    const bool run_node = !(capture && is_target && !leads_on) && !(capture && dynamic_cast<AccumulateGrad*>(node));
    if (run_node) {
      std::vector<Tensor> out = node->apply(std::move(grads));
      if (!keep_graph) node->release_saved();
      for (size_t i = 0; i < node->next_edges().size() && i < out.size(); ++i) {
        const Edge& e = node->next_edges()[i];
        if (!e.valid() || !is_needed(e.function.get()) || !out[i].defined()) continue;
        auto& buffer = task.buffers[e.function.get()];
        buffer.resize(e.function->num_outputs());
        accumulate_into(buffer[e.input_nr], validated(*node, i, std::move(out[i])));
      }
    } else if (!keep_graph) {
      node->release_saved();
    }
    for (const Edge& e : node->next_edges()) {
      if (!e.valid() || !is_needed(e.function.get())) continue;
      int& deps = task.dependencies[e.function.get()];
      if (deps > 0 && --deps == 0) {
        deps = -1;
        ready.push(e.function.get());
      }
    }
  }
  return captured;
}

// The roots and their gradients, checked as PyTorch checks them.
void prepare_roots(const char* op, const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
                   std::vector<Edge>& roots, std::vector<Tensor>& grads) {
  KILN_CHECK(grad_tensors.empty() || grad_tensors.size() == tensors.size(), op,
             "got {} tensors and {} gradients", tensors.size(), grad_tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(t.defined(), op, "element {} of tensors is undefined", i);
    KILN_CHECK(t.requires_grad(), op, "element {} of tensors does not require grad and does not have a grad_fn", i);
    Tensor g = grad_tensors.empty() ? Tensor() : grad_tensors[i];
    if (!g.defined()) {
      KILN_CHECK(t.numel() == 1, op, "grad can be implicitly created only for scalar outputs (got a tensor of size {})",
                 t.shape_str());
      g = ones(t.sizes(), t.dtype());
    } else {
      KILN_CHECK(g.sizes() == t.sizes(), op,
                 "Mismatch in shape: grad_output[{}] has a shape of {} and output[{}] has a shape of {}.", i,
                 g.shape_str(), i, t.shape_str());
      KILN_CHECK_KIND(is_complex(g.dtype()) == is_complex(t.dtype()), Type, op,
                      "For complex Tensors, both grad_output and output are required to have the same dtype. "
                      "Mismatch in dtype: grad_output[{}] has a dtype of {} and output[{}] has a dtype of {}.",
                      i, dtype_name(g.dtype()), i, dtype_name(t.dtype()));
      if (g.dtype() != t.dtype()) g = g.to(t.dtype());
    }
    roots.push_back(gradient_edge(t));
    grads.push_back(std::move(g));
  }
}

std::vector<CaptureTarget> targets_of(const char* op, const std::vector<Tensor>& inputs) {
  std::vector<CaptureTarget> targets;
  for (const Tensor& t : inputs) {
    KILN_CHECK(t.defined() && t.requires_grad(), op, "One of the differentiated Tensors does not require grad");
    Edge e = gradient_edge(t);
    targets.push_back({e.function.get(), e.input_nr});
  }
  return targets;
}

}  // namespace

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph, const std::vector<Tensor>& inputs) {
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  prepare_roots("backward", tensors, grad_tensors, roots, grads);
  std::vector<CaptureTarget> targets;
  std::vector<std::shared_ptr<Node>> keep;  // accumulators created for `inputs` live through the run
  for (const Tensor& t : inputs) {
    KILN_CHECK(t.defined() && t.is_leaf() && t.requires_grad(), "backward",
               "every tensor in inputs must be a leaf that requires grad");
    Edge e = gradient_edge(t);
    keep.push_back(e.function);
    targets.push_back({e.function.get(), e.input_nr});
  }
  run(roots, std::move(grads), retain_graph.value_or(create_graph), create_graph, targets, true);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  KILN_CHECK(!inputs.empty(), "grad", "grad requires at least one input tensor");
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  prepare_roots("grad", outputs, grad_outputs, roots, grads);
  std::vector<std::shared_ptr<Node>> keep;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) keep.push_back(gradient_edge(t).function);
  }
  const std::vector<CaptureTarget> targets = targets_of("grad", inputs);
  std::vector<Tensor> result =
      run(roots, std::move(grads), retain_graph.value_or(create_graph), create_graph, targets, false);
  for (size_t i = 0; i < result.size(); ++i) {
    if (!result[i].defined()) {
      KILN_CHECK(allow_unused, "grad",
                 "One of the differentiated Tensors appears to not have been used in the graph. Set "
                 "allow_unused=True if this is the desired behavior.");
      continue;
    }
    // The gradient of an input arrives as the gradient of the node's output; give it the
    // input's own shape and dtype.
    const Tensor& in = inputs[i];
    Tensor g = result[i];
    if (g.sizes() != in.sizes()) g = sum_to(g, in.sizes());
    if (g.dtype() != in.dtype()) {
      if (is_complex(g.dtype()) && !is_complex(in.dtype())) g = real_part(g);
      if (g.dtype() != in.dtype()) g = g.to(in.dtype());
    }
    result[i] = g;
  }
  return result;
}

}  // namespace kiln::autograd
