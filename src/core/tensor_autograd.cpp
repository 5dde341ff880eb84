// The Tensor methods of autograd that core can answer alone (requires_grad, grad,
// detach, the version counter) and the per-thread grad mode. The graph, the engine and
// the backward formulas are in the autograd layer (src/autograd).
#include "core/autograd_meta.h"
#include "kiln/error.h"
#include "kiln/grad_mode.h"
#include "kiln/tensor.h"

namespace kiln {

namespace {
thread_local bool grad_mode_enabled = true;
}  // namespace

bool GradMode::is_enabled() noexcept { return grad_mode_enabled; }
void GradMode::set_enabled(bool enabled) noexcept { grad_mode_enabled = enabled; }

namespace autograd_hooks {

bool records(const Tensor& t) { return grad_mode_enabled && t.requires_grad(); }

TensorMethodHooks& tensor_method_hooks() {
  static TensorMethodHooks hooks;
  return hooks;
}

void no_formula(const char* op) {
  fail(ErrorKind::NotImplemented, op,
       "the derivative for '{}' is not implemented in kiln's autograd (an input requires grad); "
       "run it under no_grad or on detached inputs", op);
}

}  // namespace autograd_hooks

bool Tensor::requires_grad() const {
  const AutogradMeta* meta = autograd_meta();
  return meta != nullptr && (meta->requires_grad || meta->grad_fn != nullptr);
}

bool Tensor::is_leaf() const {
  const AutogradMeta* meta = autograd_meta();
  return meta == nullptr || meta->grad_fn == nullptr;
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  KILN_CHECK(defined(), "requires_grad_", "undefined tensor");
  if (!is_leaf()) {
    KILN_CHECK(requires_grad, "requires_grad_",
               "you can only change requires_grad flags of leaf variables. If you want to use a computed "
               "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    return *this;
  }
  if (requires_grad) {
    KILN_CHECK(is_floating(dtype()) || is_complex(dtype()), "requires_grad_",
               "only Tensors of floating point and complex dtype can require gradients (got {})",
               dtype_name(dtype()));
    if (impl_->autograd == nullptr) impl_->autograd = std::make_shared<AutogradMeta>();
    impl_->autograd->requires_grad = true;
  } else if (impl_->autograd != nullptr) {
    impl_->autograd->requires_grad = false;
    // Keep the metadata only while it holds a gradient, so the op fast path stays a null test.
    if (!impl_->autograd->grad.defined()) impl_->autograd.reset();
  }
  return *this;
}

Tensor Tensor::grad() const {
  const AutogradMeta* meta = autograd_meta();
  return meta != nullptr ? meta->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) {
  KILN_CHECK(defined(), "grad", "undefined tensor");
  if (grad.defined()) {
    KILN_CHECK(grad.sizes() == sizes(), "grad", "assigned grad has data of a different size ({} vs {})",
               grad.shape_str(), shape_str());
    KILN_CHECK_KIND(grad.dtype() == dtype(), Type, "grad", "assigned grad has data of a different type ({} vs {})",
                    dtype_name(grad.dtype()), dtype_name(dtype()));
  }
  if (impl_->autograd == nullptr) {
    if (!grad.defined()) return;
    impl_->autograd = std::make_shared<AutogradMeta>();
  }
  impl_->autograd->grad = grad;
  if (!grad.defined() && !impl_->autograd->requires_grad && impl_->autograd->grad_fn == nullptr) {
    impl_->autograd.reset();
  }
}

Tensor Tensor::detach() const {
  const TensorImpl& self = impl();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = self.storage;  // the same storage, so the same version counter
  impl->sizes = self.sizes;
  impl->strides = self.strides;
  impl->offset = self.offset;
  impl->dtype = self.dtype;
  return Tensor(std::move(impl));
}

Tensor& Tensor::detach_() {
  KILN_CHECK(defined(), "detach_", "undefined tensor");
  impl_->autograd.reset();
  return *this;
}

void check_writable(const Tensor& self, const char* op) {
  KILN_CHECK(!self.storage()->read_only, op,
             "cannot write to a read-only tensor (it views a read-only numpy array or a file mapped read-only); "
             "clone() it to get a writable copy");
  if (self.has_autograd_meta() && autograd_hooks::records(self)) [[unlikely]] {
    KILN_CHECK(!self.is_leaf(), op,
               "a leaf Variable that requires grad is being used in an in-place operation.");
    fail(ErrorKind::NotImplemented, op,
         "this in-place op is not recorded by kiln's autograd when its tensor requires grad (docs/autograd.md "
         "lists the in-place ops that are); use the out-of-place op (or run it under no_grad)");
  }
  self.storage()->version.fetch_add(1, std::memory_order_relaxed);
}

void check_inplace_source(const Tensor& source, const char* op) {
  if (source.defined() && source.has_autograd_meta() && autograd_hooks::records(source)) [[unlikely]] {
    fail(ErrorKind::NotImplemented, op,
         "this in-place op does not record writing a tensor that requires grad into another (docs/autograd.md "
         "lists the in-place ops that do); use the out-of-place op (or detach() the source)");
  }
}

}  // namespace kiln
