// Installs the CPU kernels of the linear family: one row through the GEMV kernel of the
// weight dtype, more rows (and float64) through OpenBLAS, and the FP8 row quantisation.
#include "backend/cpu/linear/linear_kernels.h"
#include "backend/linear.h"

namespace kiln::cpu {
namespace {

void linear_cpu(const ExecutionContext& ctx, const LinearWeight& w, const LinearActivations& act) {
  const GemvFn gemv = act.M == 1 ? gemv_for(w.dtype) : nullptr;
  if (gemv == nullptr) return linear_gemm(ctx.pool(), w, act);
  // Per-thread scratch: decode calls this hundreds of times per token, and an allocation
  // per call was a third of the fixed cost of a small GEMV.
  gemv(ctx.pool(), w, act, ctx.scratch_of<float>(0, gemv_scratch_floats(w.K)));
}

const bool registered = [] {
  backend::LinearKernels k;
  k.linear = &linear_cpu;
  k.quantize_fp8_rows = [](const ExecutionContext& ctx, const backend::Fp8RowQuantization& p) {
    return quantize_fp8_rows(ctx.pool(), p.w.data, p.w.dtype, p.w.row_stride, p.w.N, p.w.K, p.q, p.scale,
                             p.row_sq_error, p.row_sq_norm);
  };
  k.dequantize_fp8_rows = [](const ExecutionContext& ctx, const LinearWeight& w, float* out) {
    dequantize_fp8_rows(ctx.pool(), w, out);
  };
  backend::linear_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
