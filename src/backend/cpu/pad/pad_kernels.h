// The CPU kernels of the pad family (backend/pad.h), named here for the tests, which
// compare them with a scalar reference.
#pragma once

#include "backend/pad.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

void constant_pad(ThreadPool& pool, const backend::ConstantPadProblem& p);

}  // namespace kiln::cpu
