// One token of the recurrent gated delta rule for one value head (internal), compiled
// once per Highway target (delta_rule_step.cpp): the decode step's whole cost is this
// head's float32 state, read from memory and written back, so the loop is laid out to
// stream it (see the .cpp).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// With q and k already normalised and scaled, kq = k . q, and S the head's state
// [dk, dv] (row-major):
//   delta = beta (v - decay S^T k);   out = decay S^T q + kq delta;
//   S <- decay S + k delta^T
// (S' = decay S + k delta^T gives S'^T q = decay S^T q + delta (k . q), so the output
// needs no read of the updated state). out must not overlap S, q, k or v.
void delta_rule_step(const float* q, const float* k, float kq, const float* v, float decay, float beta, float* S,
                     int64_t dk, int64_t dv, float* out);

// Plain loops in the order of the definition above (the test oracle of delta_rule_step).
void delta_rule_step_scalar(const float* q, const float* k, float kq, const float* v, float decay, float beta,
                            float* S, int64_t dk, int64_t dv, float* out);

// The Highway targets delta_rule_step was compiled for (tests run each).
int64_t delta_rule_step_simd_targets();

}  // namespace kiln::cpu
