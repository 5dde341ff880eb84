// The op hook table (ops/autograd_hooks.h) and the argument tests that need loops.
#include "ops/autograd_hooks.h"
#include "ops/autograd_hooks_linalg.h"

namespace kiln::autograd_hooks {

OpHooks& op_hooks() {
  static OpHooks hooks;
  return hooks;
}

LinalgHooks& linalg_hooks() {
  static LinalgHooks hooks;
  return hooks;
}

bool might_record(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (t.defined() && t.has_autograd_meta()) return true;
  }
  return false;
}

namespace {
bool might_record_weights(const SwigluWeights& w) {
  return w.gate.has_autograd_meta() || w.up.has_autograd_meta() || w.down.has_autograd_meta();
}
}  // namespace

bool might_record(const MoeExperts& experts) {
  for (const SwigluWeights& w : experts.experts) {
    if (might_record_weights(w)) return true;
  }
  return false;
}

bool might_record(const std::optional<SharedExpert>& shared) {
  return shared.has_value() && (might_record_weights(shared->weights) || shared->gate_weight.has_autograd_meta());
}

}  // namespace kiln::autograd_hooks
