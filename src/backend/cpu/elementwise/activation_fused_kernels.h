// Fused SwiGLU-style activation kernels on the CPU (internal header: no Highway here).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// y[i] = a[i] * silu(g[i]), silu(g) = g / (1 + e^-g), on contiguous arrays; y may
// equal a or g. Used by silu_and_mul (a = up, g = gate) and the gated RMSNorm.
void mul_silu(const float* a, const float* g, float* y, int64_t n);
void mul_silu(const double* a, const double* g, double* y, int64_t n);
// y[i] = silu(x[i]) with the same vector exp; y may equal x.
void silu(const float* x, float* y, int64_t n);

// The Highway targets (HWY_* bits) the kernels were compiled for; tests pin each.
int64_t activation_fused_simd_targets();

}  // namespace kiln::cpu
