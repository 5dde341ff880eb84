// Decay weighting of one chunk's matrices for the chunked gated delta rule (internal):
// SIMD exp, compiled once per Highway target (chunk_decay.cpp).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// For the n rows of a chunk, with G the cumulative log decays and beta the write
// strengths: the system row i becomes A(i, j) *= beta_i e^{G_i - G_j} for j < i and zero
// from the diagonal on; the scores row P(i, j) *= e^{G_i - G_j} for j <= i and zero past
// the diagonal. Rows are C floats apart; entries past column n - 1 are zeroed too. The
// unweighted rows are read from A_in and P_in (the same buffers as A and P, or the
// product a group of value heads shares).
void weight_chunk_rows(const float* G, const float* beta, int64_t n, int64_t C, const float* A_in, const float* P_in,
                       float* A, float* P);

}  // namespace kiln::cpu
