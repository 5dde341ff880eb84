// Front ends of sort, argsort and topk: validation, output shapes, 0-dim inputs, then
// the sort table's kernel (backend/sort.h).
#include "backend/sort.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "ops/autograd_hooks.h"
#include "ops/op_utils.h"

namespace kiln {
namespace {

void check_sortable(const Tensor& input, const char* op) {
  check_defined(input, op, "input");
  KILN_CHECK_KIND(!is_complex(input.dtype()), Type, op, "does not support complex input (got {})",
                  dtype_name(input.dtype()));
}

void run_sort(const char* op, const Tensor& input, int64_t dim, int64_t k, bool descending, bool order_selected,
              const ValuesIndices& out) {
  const auto kernel = backend::sort_kernels.on(input.device(), op).sort;
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&input, &out.values, &out.indices}), 0}; });
  kernel(current_context(), {input, dim, k, descending, order_selected, out.values, out.indices});
}

// A 0-dim input is its own sorted line: the value, at index 0.
ValuesIndices scalar_line(const Tensor& input) { return {input.clone(), zeros({}, DType::Int64)}; }

}  // namespace

// kiln's sort is always stable, so `stable` changes nothing.
ValuesIndices sort(const Tensor& input, int64_t dim, bool descending, bool stable) {
  KILN_AUTOGRAD(sort, input, dim, descending, stable);
  check_sortable(input, "sort");
  const int64_t d = wrap_dim(dim, input.dim(), "sort");
  if (input.dim() == 0) return scalar_line(input);
  ValuesIndices r{Tensor::empty(input.sizes(), input.dtype(), kCPU, "sort"),
                  Tensor::empty(input.sizes(), DType::Int64, kCPU, "sort")};
  run_sort("sort", input, d, input.sizes()[d], descending, true, r);
  return r;
}

Tensor argsort(const Tensor& input, int64_t dim, bool descending, bool stable) {
  check_sortable(input, "argsort");
  return sort(input, dim, descending, stable).indices;
}

ValuesIndices topk(const Tensor& input, int64_t k, int64_t dim, bool largest, bool sorted) {
  KILN_AUTOGRAD(topk, input, k, dim, largest, sorted);
  check_sortable(input, "topk");
  const int64_t d = wrap_dim(dim, input.dim(), "topk");
  const int64_t size = input.dim() == 0 ? 1 : input.sizes()[d];
  KILN_CHECK_KIND(k >= 0 && k <= size, Index, "topk", "selected index k out of range (k = {}, size of dim {} is {})",
                  k, d, size);
  if (input.dim() == 0) return scalar_line(input);  // as PyTorch, even for k = 0
  Shape out_shape = input.sizes();
  out_shape[d] = k;
  ValuesIndices r{Tensor::empty(out_shape, input.dtype(), kCPU, "topk"),
                  Tensor::empty(out_shape, DType::Int64, kCPU, "topk")};
  run_sort("topk", input, d, k, largest, sorted, r);
  return r;
}

}  // namespace kiln
