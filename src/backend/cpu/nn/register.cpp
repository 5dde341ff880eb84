// Installs the CPU kernels of the nn families: softmax, norm and rope.
#include "backend/cpu/nn/norm_kernels.h"
#include "backend/cpu/nn/rope_kernels.h"
#include "backend/cpu/nn/softmax_kernels.h"
#include "backend/norm.h"
#include "backend/rope.h"
#include "backend/softmax.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::softmax_kernels.install(DeviceType::CPU, {[](const ExecutionContext& ctx, const SoftmaxProblem& p) {
                                     softmax_cpu(p, ctx.pool());
                                   }});

  backend::NormKernels norm;
  norm.rms_norm = [](const ExecutionContext& ctx, const RmsNormProblem& p) { rms_norm_cpu(p, ctx); };
  norm.layer_norm = [](const ExecutionContext& ctx, const LayerNormProblem& p) { layer_norm_cpu(p, ctx); };
  backend::norm_kernels.install(DeviceType::CPU, norm);

  backend::RopeKernels rope;
  rope.inv_freq = [](const ExecutionContext&, int64_t rotary_dim, double rope_theta, float* out) {
    rope_inv_freq_cpu(rotary_dim, rope_theta, out);
  };
  rope.cos_sin = [](const ExecutionContext&, const RopeCosSinProblem& p) { rope_cos_sin_cpu(p); };
  rope.rope = [](const ExecutionContext& ctx, const RopeProblem& p) { rope_cpu(p, ctx.pool()); };
  backend::rope_kernels.install(DeviceType::CPU, rope);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
