// Row scaling of the chunked gated delta rule (internal): the right-hand sides beta v
// and -beta e^G k, and Delta's rows weighted by their decay to the chunk's end. Compiled
// once per Highway target (chunk_rows.cpp): the caller's file is built for the baseline
// target only, where this loop ran four lanes wide.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// out[i] = s * x[i] for i < n (out may be x). Bit-exact: one product per element.
void scale_row(const float* x, float s, int64_t n, float* out);

// The Highway targets scale_row was compiled for (tests run each).
int64_t chunk_rows_simd_targets();

}  // namespace kiln::cpu
