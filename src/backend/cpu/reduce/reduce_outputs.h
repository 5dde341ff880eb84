// The reductions of the reduce table on the CPU (register.cpp installs them): each runs
// reduce_loop with the kernels of its kind and turns every output's final partial into
// its value (a mean's division, var/std, a norm's root), written to the output tensor.
#pragma once

#include "backend/reduce.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

void reduce_cpu(ThreadPool& pool, const backend::ReduceProblem& p);
void variance_cpu(ThreadPool& pool, const backend::VarianceProblem& p);
void vector_norm_cpu(ThreadPool& pool, const backend::VectorNormProblem& p);

}  // namespace kiln::cpu
