// Installs the CPU attention kernel: the fused decode kernel where it applies, else the
// general tiled kernel.
#include "backend/attention.h"
#include "backend/cpu/attention/attention_kernels.h"

namespace kiln::cpu {
namespace {

void attention_cpu(const ExecutionContext& ctx, const AttentionProblem& p) {
  if (p.L == 1 && p.bias == nullptr && p.dropout_p == 0) {
    AttentionProblem decode = p;
    // Top-left causal alignment lets a single query see key 0 only.
    if (decode.causal) decode.S = 1;
    decode.causal = false;
    return attention_decode_cpu(decode, ctx.pool());
  }
  attention_general_cpu(p, ctx.pool());
}

const bool registered = [] {
  backend::attention_kernels.install(DeviceType::CPU, {&attention_cpu});
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
