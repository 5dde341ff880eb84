// Installs the CPU kernels of the matrix-product families: matmul (batched GEMM),
// scaled_mm and grouped_mm.
#include "backend/cpu/matmul/blas.h"
#include "backend/cpu/matmul/grouped_mm_kernels.h"
#include "backend/cpu/matmul/scaled_mm.h"
#include "backend/grouped_mm.h"
#include "backend/matmul.h"
#include "backend/scaled_mm.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::MatmulKernels matmul;
  matmul.supports = &gemm_supports;
  matmul.reads_in_place = [](DType dtype, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
    // The integer loop takes any strides; OpenBLAS needs a unit inner stride.
    return is_integral(dtype) || blas_accepts(rows, cols, row_stride, col_stride);
  };
  matmul.gemm_batched = [](const ExecutionContext& ctx, const backend::BatchedGemm& p) {
    gemm_batched(ctx.pool(), p.dtype, p.batch, p.M, p.N, p.K, p.a, p.b, p.c);
  };
  backend::matmul_kernels.install(DeviceType::CPU, matmul);

  backend::scaled_mm_kernels.install(DeviceType::CPU, {[](const ExecutionContext& ctx,
                                                          const backend::ScaledMmProblem& p) {
                                       scaled_mm(ctx.pool(), p);
                                     }});
  backend::grouped_mm_kernels.install(DeviceType::CPU, {[](const ExecutionContext& ctx, const GroupedMmArgs& args) {
                                        grouped_mm(ctx.pool(), args);
                                      }});
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
