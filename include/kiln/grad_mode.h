// Grad mode: whether ops on tensors that require grad are recorded for backward, per
// thread (torch.is_grad_enabled, torch.no_grad, torch.enable_grad). On by default.
#pragma once

namespace kiln {

struct GradMode {
  static bool is_enabled() noexcept;
  static void set_enabled(bool enabled) noexcept;
};

// Sets grad mode for a scope and restores the previous mode when it ends
// (torch.set_grad_enabled used as a context manager).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(previous_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool previous_;
};

// torch.no_grad(): nothing in the scope is recorded, so results do not require grad.
struct NoGradGuard : AutoGradMode {
  NoGradGuard() : AutoGradMode(false) {}
};
// torch.enable_grad(): recording on again inside a no_grad scope.
struct EnableGradGuard : AutoGradMode {
  EnableGradGuard() : AutoGradMode(true) {}
};

}  // namespace kiln
