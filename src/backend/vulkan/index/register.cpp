// Installs the Vulkan index_select (and so embedding) kernel (shaders/index_rows.comp).
// The front ends read the index on the host to check its range (index_values downloads
// it: a wait), then the rows go back up as int32 with the kernel; masked_fill through the
// where kernel. gather, scatter_add and masked_select have no Vulkan kernel yet.
#include <limits>
#include <vector>

#include "backend/index.h"
#include "backend/vulkan/elementwise/where.h"
#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

void index_select(const ExecutionContext&, const backend::IndexSelectProblem& p) {
  const char* op = "index_select";
  if (p.out.numel() == 0) return;
  const Tensor input = p.input.contiguous();
  KILN_CHECK(p.out.is_contiguous(), op, "expected a contiguous output");
  KILN_CHECK(input.size(p.dim) <= std::numeric_limits<int32_t>::max(), op, "too many rows for a Vulkan kernel");
  const size_t bytes = input.element_size();
  KILN_CHECK_KIND(bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8 || bytes == 16, NotImplemented, op,
                  "{} has no Vulkan kernel", dtype_name(input.dtype()));
  Tensor rows = Tensor::empty({static_cast<int64_t>(p.rows.size())}, DType::Int32);
  for (size_t j = 0; j < p.rows.size(); ++j) rows.data<int32_t>()[j] = static_cast<int32_t>(p.rows[j]);
  const Tensor device_rows = rows.to(p.out.device());
  int64_t inner = 1;
  for (int64_t d = p.dim + 1; d < input.dim(); ++d) inner *= input.size(d);
  const Binding out = bind(p.out, op);
  const Binding in = bind(input, op);
  const Binding r = bind(device_rows, op);
  struct {
    uint32_t n, R, inner, size, dst_first, src_first, rows_first;
  } push{static_cast<uint32_t>(p.out.numel()), static_cast<uint32_t>(p.rows.size()), static_cast<uint32_t>(inner),
         static_cast<uint32_t>(input.size(p.dim)), out.first, in.first, r.first};
  const uint32_t spec[] = {static_cast<uint32_t>(bytes)};
  const auto grid = grid_for(p.out.numel(), 256, op);
  dispatch(op, "index_rows", spec, {out, in, r}, &push, sizeof(push), grid[0], grid[1]);
}

// out = mask ? value : input, as where (the in-place form has out == input, which each
// invocation reads before it writes). The value, a 0-dim CPU tensor of input's dtype,
// goes up with the commands.
void masked_fill(const ExecutionContext&, const backend::MaskedFillProblem& p) {
  const Tensor value = p.value.to(p.out.device()).expand(p.out.sizes());
  record_where("masked_fill", p.out, p.mask, value, p.input);
}

const bool registered = [] {
  backend::IndexKernels k;
  k.index_values = [](const ExecutionContext& ctx, const Tensor& index) {
    return backend::index_kernels.on(kCPU, "index").index_values(ctx, index.to(kCPU));
  };
  k.index_select = &index_select;
  k.gather = [](const ExecutionContext&, const backend::GatherProblem&) { missing_kernel("gather"); };
  k.scatter_add = [](const ExecutionContext&, const backend::ScatterAddProblem&) { missing_kernel("scatter_add"); };
  k.masked_fill = &masked_fill;
  k.masked_select = [](const ExecutionContext&, const Tensor&, const Tensor&) -> Tensor {
    missing_kernel("masked_select");
  };
  backend::index_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
