// Installs the CPU kernels of the random family (common/random.cpp).
#include "backend/cpu/common/random.h"
#include "backend/random.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::RandomKernels k;
  k.uniform = [](const ExecutionContext& ctx, const backend::RandomFill& f) {
    if (f.out.dtype() == DType::Float64) {
      fill_uniform_f64(ctx.pool(), f.key, f.out.data<double>(), f.out.numel());
    } else {
      fill_uniform_f32(ctx.pool(), f.key, f.out.data<float>(), f.out.numel());
    }
  };
  k.normal = [](const ExecutionContext& ctx, const backend::RandomFill& f) {
    if (f.out.dtype() == DType::Float64) {
      fill_normal_f64(ctx.pool(), f.key, f.out.data<double>(), f.out.numel());
    } else {
      fill_normal_f32(ctx.pool(), f.key, f.out.data<float>(), f.out.numel());
    }
  };
  k.randint = [](const ExecutionContext& ctx, const backend::RandintFill& f) {
    fill_randint(ctx.pool(), f.key, f.low, f.range, f.out.data<int64_t>(), f.out.numel());
  };
  backend::random_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
