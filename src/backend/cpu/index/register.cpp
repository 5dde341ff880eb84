// Installs the CPU kernels of the index family (gather_kernels, scatter_kernels,
// masked_kernels, advanced_index_kernels).
#include "backend/cpu/index/index_kernels.h"
#include "backend/index.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::IndexKernels k;
  k.index_values = [](const ExecutionContext&, const Tensor& index) { return index_values(index); };
  k.index_select = [](const ExecutionContext& ctx, const backend::IndexSelectProblem& p) {
    index_select_rows(ctx.pool(), p.out, p.input, p.dim, p.rows);
  };
  k.gather = [](const ExecutionContext& ctx, const backend::GatherProblem& p) {
    gather(ctx.pool(), p.out, p.input, p.dim, p.index);
  };
  k.scatter_add = [](const ExecutionContext& ctx, const backend::ScatterAddProblem& p) {
    scatter_add(ctx.pool(), p.self, p.dim, p.index, p.src, p.alpha);
  };
  k.masked_fill = [](const ExecutionContext& ctx, const backend::MaskedFillProblem& p) {
    masked_fill(ctx.pool(), p.out, p.input, p.mask, p.value.data_ptr());
  };
  k.masked_select = [](const ExecutionContext& ctx, const Tensor& input, const Tensor& mask) {
    return masked_select(ctx.pool(), input, mask);
  };
  k.nonzero = [](const ExecutionContext& ctx, const Tensor& input) { return nonzero(ctx.pool(), input); };
  k.index_gather = [](const ExecutionContext& ctx, const backend::IndexGatherProblem& p) {
    index_gather(ctx.pool(), p);
  };
  k.index_put = [](const ExecutionContext&, const backend::IndexPutProblem& p) { index_put(p); };
  backend::index_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
