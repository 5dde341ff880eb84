// Attention kernels on the CPU (internal header: no Highway here).
//
// attention_prefill.cpp: the general tiled online-softmax kernel (any L, bias, causal,
// dropout); attention_decode.cpp: the fused L == 1 kernel split over the context.
// Both are compiled once per Highway target; the op front end (src/ops/attention.cpp)
// validates, broadcasts and fills an AttentionProblem (backend/attention.h), and the
// registration (register.cpp) picks the kernel.
#pragma once

#include <cstdint>

#include "backend/attention.h"
#include "kiln/dtype.h"

namespace kiln {
class ThreadPool;
}

namespace kiln::cpu {

using backend::AttentionProblem;

// The general kernel: any L and S >= 1, bias, causal and dropout. Work items are
// (row, block of queries); each walks the key blocks it can see with an online
// softmax, so memory is O(block^2) per thread, independent of L * S.
void attention_general_cpu(const AttentionProblem& p, ThreadPool& pool);

// The decode kernel: L == 1, S >= 1, no bias, not causal, no dropout. Consecutive
// rows reading the same K and V (GQA groups, broadcast heads) are processed together
// so the cache is read once per group; each group's context is split into slices
// reduced on separate threads and combined at the end.
void attention_decode_cpu(const AttentionProblem& p, ThreadPool& pool);

// The Highway targets (HWY_* bits) both kernels were compiled for; tests pin each.
int64_t attention_simd_targets();

}  // namespace kiln::cpu
