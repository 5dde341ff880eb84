// Installs the Vulkan rms_norm kernel (shaders/rms_norm.comp): torch's rms_norm and
// LlamaRMSNorm (ScaleThenWeight, RoundThenWeight) and the gated norm of the Gated
// DeltaNet layers (Gated) in float32 over float32, float16, bfloat16 and float8 rows, one
// work group per row. layer_norm and float64 have no Vulkan kernel yet.
#include "backend/norm.h"
#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::vulkan {
namespace {

bool is_float_storage(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || is_fp8(t);
}

void rms_norm(const ExecutionContext&, const backend::RmsNormProblem& p) {
  const char* op = "rms_norm";
  KILN_CHECK_KIND(p.compute == DType::Float32 && is_float_storage(p.in_dtype) && is_float_storage(p.out_dtype),
                  NotImplemented, op, "{} input computed in {} has no Vulkan kernel (float32 compute does)",
                  dtype_name(p.in_dtype), dtype_name(p.compute));
  int64_t elements = 0;
  KILN_CHECK(checked_mul(p.rows, p.cols, &elements), op, "size overflow");
  if (elements == 0) return;
  const Binding out = bind_raw(p.out, p.out_dtype, elements, op);
  const Binding in = bind_raw(p.in, p.in_dtype, elements, op);
  const Binding w = p.weight != nullptr ? bind_raw(p.weight, DType::Float32, p.cols, op) : in;
  const bool gated = p.kind == backend::RmsNormKind::Gated;
  // The gate is in the compute dtype, float32 here; unused bindings repeat the input.
  const Binding gate = gated ? bind_raw(p.gate, DType::Float32, elements, op) : in;
  struct {
    uint32_t rows, cols;
    float eps;
    uint32_t out_first, in_first, w_first, gate_first;
  } push{static_cast<uint32_t>(p.rows), static_cast<uint32_t>(p.cols), static_cast<float>(p.eps), out.first, in.first,
         w.first, gate.first};
  const uint32_t kind = p.kind == backend::RmsNormKind::ScaleThenWeight ? 0u : gated ? 2u : 1u;
  const uint32_t spec[] = {dtype_code(p.in_dtype), dtype_code(p.out_dtype), kind, p.weight != nullptr ? 1u : 0u,
                           dtype_code(gated ? p.weighted_dtype : DType::Float32)};
  const auto grid = grid_for(p.rows, 1, op);
  dispatch(op, "rms_norm", spec, {out, in, w, gate}, &push, sizeof(push), grid[0], grid[1]);
}

const bool registered = [] {
  backend::NormKernels k;
  k.rms_norm = &rms_norm;
  k.layer_norm = [](const ExecutionContext&, const backend::LayerNormProblem&) { missing_kernel("layer_norm"); };
  backend::norm_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
