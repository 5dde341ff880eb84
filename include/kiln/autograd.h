// Reverse-mode automatic differentiation with PyTorch's model (docs/autograd.md).
//
// A tensor requires grad when it is a leaf marked with requires_grad_() or the result of
// a recorded op. While grad mode is on (kiln/grad_mode.h), every differentiable op with
// an input that requires grad records a node holding its backward formula; backward()
// walks the nodes from the outputs and accumulates into the leaves' grad(), grad()
// returns the gradients instead. Complex gradients follow PyTorch's convention: for a
// real loss L of z = x + iy the gradient is dL/dx + i dL/dy (the conjugate Wirtinger
// derivative times two).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/grad_mode.h"
#include "kiln/tensor.h"

namespace kiln::autograd {

class Node;

// Where a gradient goes: input `input_nr` of `function` (the node that produced a
// tensor, or the accumulator of a leaf).
struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool valid() const { return function != nullptr; }
};

// The shape and dtype a gradient must have.
struct GradGeometry {
  Shape sizes;
  DType dtype = DType::Float32;
};

// One recorded op: given the gradients of its outputs, its backward returns the
// gradients of its inputs, which flow along next_edges().
class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(std::string name);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // PyTorch's names: "MulBackward0", "AccumulateGrad", ...
  const std::string& name() const { return name_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  // Creation order; the engine runs later nodes first.
  uint64_t sequence_nr() const { return sequence_nr_; }
  size_t num_outputs() const { return outputs_.size(); }

  // grads: one per output (undefined where none flowed). Returns one per next edge.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Frees what the backward keeps (saved tensors) once a backward without
  // retain_graph has run through this node.
  virtual void release_saved() {}

  std::vector<Edge> next_edges_;
  std::vector<GradGeometry> inputs_;   // per next edge: what its gradient must look like
  std::vector<GradGeometry> outputs_;  // per output

 private:
  std::string name_;
  uint64_t sequence_nr_;
};

// The node that produced `t` (null for leaves and tensors outside autograd).
std::shared_ptr<Node> grad_fn(const Tensor& t);
// The edge gradients of `t` flow along (invalid when t does not require grad).
Edge gradient_edge(const Tensor& t);

// torch.autograd.backward / Tensor.backward: accumulates d(sum_i <grad_tensors[i],
// tensors[i]>)/d(leaf) into every leaf's grad(). A missing gradient is allowed for
// one-element tensors only ("grad can be implicitly created only for scalar outputs").
// retain_graph defaults to create_graph; without it the graph's saved tensors are freed
// and a second backward through it is an error. With create_graph the gradients are
// themselves recorded (double backward). `inputs`, when given, limits accumulation to
// those leaves.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
              const std::vector<Tensor>& inputs = {});
// torch.autograd.grad: the gradients of the outputs with respect to `inputs`, returned
// instead of accumulated. An input the outputs do not depend on is an error unless
// allow_unused (then its gradient is undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

// ---- gradient checking (torch.autograd.gradcheck) ----
using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
struct GradcheckOptions {
  double eps = 1e-6;   // central differences x +- eps
  double atol = 1e-5;  // |analytical - numerical| <= atol + rtol * |numerical|
  double rtol = 1e-3;
};
// Compares the Jacobian of fn at `inputs` computed by backward with central finite
// differences, for every input that requires grad (float64/complex128 expected; inputs
// keep their strides), every output and, for complex tensors, real and imaginary parts
// separately. Returns an empty string when they agree, else what differs (PyTorch's
// "Jacobian mismatch for output 0 with respect to input 0" and the worst entry).
std::string gradcheck_mismatch(const Function& fn, const std::vector<Tensor>& inputs,
                               const GradcheckOptions& options = {});
// The same for the second derivative: gradcheck of the map (inputs, v) -> grad(fn(inputs),
// inputs, v, create_graph=true) with random grad_outputs v.
std::string gradgradcheck_mismatch(const Function& fn, const std::vector<Tensor>& inputs,
                                   const GradcheckOptions& options = {}, uint64_t seed = 0);

// Complex conjugate, recorded like any op (the identity for real tensors).
Tensor conj(const Tensor& t);

}  // namespace kiln::autograd
