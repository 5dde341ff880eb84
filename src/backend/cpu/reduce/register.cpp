// Installs the CPU kernels of the reduce and sort families.
#include "backend/cpu/reduce/reduce_outputs.h"
#include "backend/cpu/reduce/scan_kernels.h"
#include "backend/cpu/reduce/sort_kernels.h"
#include "backend/reduce.h"
#include "backend/sort.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::ReduceKernels r;
  r.reduce = [](const ExecutionContext& ctx, const backend::ReduceProblem& p) { reduce_cpu(ctx.pool(), p); };
  r.variance = [](const ExecutionContext& ctx, const backend::VarianceProblem& p) { variance_cpu(ctx.pool(), p); };
  r.vector_norm = [](const ExecutionContext& ctx, const backend::VectorNormProblem& p) {
    vector_norm_cpu(ctx.pool(), p);
  };
  r.cumsum = [](const ExecutionContext& ctx, const backend::CumsumProblem& p) {
    cumsum_kernel(ctx.pool(), p.input, p.dim, p.out);
  };
  backend::reduce_kernels.install(DeviceType::CPU, r);
  backend::sort_kernels.install(DeviceType::CPU, {[](const ExecutionContext& ctx, const backend::SortProblem& p) {
                                  sort_kernel(ctx.pool(), p.input, p.dim, p.k, p.descending, p.order_selected,
                                              p.values, p.indices);
                                }});
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
