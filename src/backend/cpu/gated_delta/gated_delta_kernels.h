// Gated DeltaNet kernels on the CPU (internal header).
#pragma once

#include "backend/gated_delta.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

using backend::CausalConv1dProblem;
using backend::DeltaGatesProblem;
using backend::GatedDeltaRuleProblem;

void causal_conv1d_cpu(const CausalConv1dProblem& p, ThreadPool& pool);
void delta_gates_cpu(const DeltaGatesProblem& p, ThreadPool& pool);
void gated_delta_rule_cpu(const GatedDeltaRuleProblem& p, ThreadPool& pool);
void gated_delta_rule_chunked_cpu(const ExecutionContext& ctx, const GatedDeltaRuleProblem& p, int64_t chunk_size);

}  // namespace kiln::cpu
