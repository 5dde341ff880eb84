#include "ops/out_checks.h"

#include "core/memory_overlap.h"
#include "kiln/error.h"
#include "kiln/grad_mode.h"
#include "ops/op_utils.h"

namespace kiln::out_detail {

void check_out(const char* op, const Tensor& out, const Shape& shape, DType dtype, Device device,
               std::initializer_list<const Tensor*> inputs) {
  check_defined(out, op, "out");
  if (GradMode::is_enabled()) {
    for (const Tensor* t : inputs) {
      KILN_CHECK(t == nullptr || !t->defined() || !t->requires_grad(), op,
                 "functions with out=... arguments don't support automatic differentiation, but one of the "
                 "arguments requires grad.");
    }
  }
  KILN_CHECK(out.sizes() == shape, op, "out must have shape {} (the result's), got {}", shape_to_string(shape),
             out.shape_str());
  KILN_CHECK_KIND(out.dtype() == dtype, Type, op, "Expected out tensor to have dtype {}, but got {} instead",
                  dtype_name(dtype), dtype_name(out.dtype()));
  KILN_CHECK(out.device() == device, op,
             "Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
             device.str(), out.device().str());
  KILN_CHECK(out.is_contiguous(), op, "out must be contiguous");
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->defined()) check_no_overlap(out, *t, op);
  }
}

}  // namespace kiln::out_detail
