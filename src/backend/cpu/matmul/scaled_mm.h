// The CPU scaled_mm kernel (internal; the front end is src/ops/scaled_mm.cpp).
#pragma once

#include "backend/scaled_mm.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

// fp8 -> float32 (SIMD), OpenBLAS sgemm, then one epilogue pass per row that applies the
// scales, the bias and the output cast. Scaling after the product costs M*N multiplies
// instead of M*K + K*N.
void scaled_mm(ThreadPool& pool, const backend::ScaledMmProblem& p);

}  // namespace kiln::cpu
