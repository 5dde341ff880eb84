// How a backward formula is recorded (internal to the autograd layer).
//
// A formula entry computes its op with recording off (`below_autograd`), then calls
// `record` with the inputs, the outputs, the tensors its backward needs and the
// backward itself. `record` does nothing when no input requires grad.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/autograd_meta.h"
#include "kiln/autograd.h"
#include "kiln/grad_mode.h"
#include "kiln/tensor.h"

namespace kiln::autograd {

// A tensor kept for the backward, with the version it had: unpacking it after an
// in-place change raises PyTorch's error. Outputs of the node itself are kept without
// their grad_fn (which would be a cycle) and get it back when unpacked.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output, const std::shared_ptr<Node>& node, uint32_t output_nr);
  Tensor unpack(const Node& owner) const;

 private:
  Tensor tensor_;  // an input itself, or a detached alias of an output
  uint64_t version_ = 0;
  bool is_output_ = false;
  std::weak_ptr<Node> node_;
  uint32_t output_nr_ = 0;
};

// What a formula's backward receives.
struct BackwardContext {
  std::vector<Tensor> grads;  // one per output, zeros where no gradient flowed
  std::vector<Tensor> saved;  // the saved tensors, in the order given to record
  std::vector<bool> needs;    // per input: whether its gradient is wanted
  const Tensor& grad() const { return grads[0]; }
};
using BackwardFn = std::function<std::vector<Tensor>(BackwardContext&)>;

// Which tensor to save: an input (or any tensor that is not an output of the op), or
// output number `output`.
struct Save {
  Tensor tensor;
  int output = -1;
  static Save input(const Tensor& t) { return {t, -1}; }
  static Save out(int i) { return {Tensor(), i}; }
};

class FormulaNode : public Node {
 public:
  FormulaNode(std::string name, BackwardFn fn) : Node(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_saved() override;
  std::vector<SavedTensor> saved_;

 private:
  BackwardFn fn_;
  bool released_ = false;
};

// Adds the gradient into a leaf's grad().
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

// Runs f with recording off: the forward of a formula entry.
template <typename F>
auto below_autograd(F&& f) {
  NoGradGuard guard;
  return f();
}

bool any_requires_grad(const std::vector<Tensor>& inputs);

// Records outputs (replaced by aliases that carry the node) as computed from inputs.
// Outputs of integer or bool dtype take no part. A no-op when no input requires grad.
void record(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor*> outputs,
            std::vector<Save> saved, BackwardFn backward);
// The one-output case: returns the recorded output.
Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output, std::vector<Save> saved,
              BackwardFn backward);

}  // namespace kiln::autograd
