// Installs the Vulkan RoPE rotation (shaders/rope.comp) for float32, float16 and bfloat16
// activations with float32 tables. The tables themselves (inv_freq, cos/sin of
// positions) are computed on the host: apply_rotary_emb brings device positions over
// first (a wait per call, fine for a first version; docs/gpu.md).
#include "backend/rope.h"
#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::vulkan {
namespace {

void rope(const ExecutionContext&, const backend::RopeProblem& p) {
  const char* op = "apply_rotary_emb";
  KILN_CHECK_KIND(p.dtype == DType::Float32 || p.dtype == DType::Float16 || p.dtype == DType::BFloat16,
                  NotImplemented, op, "{} has no Vulkan RoPE kernel (float32, float16 and bfloat16 do)",
                  dtype_name(p.dtype));
  int64_t n = 0, table = 0;
  KILN_CHECK(checked_mul(p.tokens, p.heads, &n) && checked_mul(n, p.head_dim, &n) &&
                 checked_mul(p.table_rows, p.rotary_dim / 2, &table),
             op, "size overflow");
  if (n == 0) return;
  const Binding out = bind_raw(p.out, p.dtype, n, op);
  const Binding x = bind_raw(p.x, p.dtype, n, op);
  const Binding c = bind_raw(p.cos, DType::Float32, table, op);
  const Binding s = bind_raw(p.sin, DType::Float32, table, op);
  struct {
    uint32_t n, heads, head_dim, rotary_dim, table_rows, out_first, x_first, cos_first, sin_first;
  } push{static_cast<uint32_t>(n),      static_cast<uint32_t>(p.heads), static_cast<uint32_t>(p.head_dim),
         static_cast<uint32_t>(p.rotary_dim), static_cast<uint32_t>(p.table_rows), out.first, x.first, c.first,
         s.first};
  const uint32_t spec[] = {dtype_code(p.dtype), p.interleaved ? 1u : 0u};
  const auto grid = grid_for(n, 256, op);
  dispatch(op, "rope", spec, {out, x, c, s}, &push, sizeof(push), grid[0], grid[1]);
}

const bool registered = [] {
  backend::RopeKernels k;
  k.rope = &rope;
  k.inv_freq = [](const ExecutionContext&, int64_t, double, float*) { missing_kernel("rope_inv_freq"); };
  k.cos_sin = [](const ExecutionContext&, const backend::RopeCosSinProblem&) { missing_kernel("rope_cos_sin"); };
  backend::rope_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
