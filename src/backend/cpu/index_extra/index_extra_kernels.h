// CPU kernels of the index_extra family: take, put_ and bincount.
#pragma once

#include "backend/index_extra.h"

namespace kiln::cpu {

void take_cpu(const ExecutionContext& ctx, const backend::TakeProblem& p);
void put_cpu(const ExecutionContext& ctx, const backend::PutProblem& p);
void value_range_cpu(const ExecutionContext& ctx, const int64_t* values, int64_t count, int64_t* min, int64_t* max);
void bincount_cpu(const ExecutionContext& ctx, const backend::BincountProblem& p);
bool bincount_one_pass_cpu(const ExecutionContext& ctx, const backend::BincountOnePassProblem& p);

}  // namespace kiln::cpu
