// The CPU kernels of the interpolate family (backend/interpolate.h), named here for the
// tests, which compare them with a scalar reference.
#pragma once

#include "backend/interpolate.h"

namespace kiln::cpu {

void resample_forward(const ExecutionContext& ctx, const backend::ResampleProblem& p);
void resample_backward(const ExecutionContext& ctx, const backend::ResampleProblem& p);

}  // namespace kiln::cpu
