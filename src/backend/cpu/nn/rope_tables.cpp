// HF's default rotary tables in float32 (plain loops: a few values per position).
#include <cmath>

#include "backend/cpu/nn/rope_kernels.h"

namespace kiln::cpu {

void rope_inv_freq_cpu(int64_t rotary_dim, double rope_theta, float* out) {
  // HF: 1.0 / (base ** (arange(0, d, 2).float() / d)), every step in float32 (base
  // rounded to float32 too); the power is evaluated in double and rounded, i.e.
  // correctly rounded where float32 pow may be 1 ulp off.
  const double base = static_cast<double>(static_cast<float>(rope_theta));
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    const float power = static_cast<float>(std::pow(base, static_cast<double>(exponent)));
    out[i] = 1.0f / power;
  }
}

void rope_cos_sin_cpu(const RopeCosSinProblem& p) {
  for (int64_t t = 0; t < p.count; ++t) {
    const float pos = static_cast<float>(p.positions[t]);
    for (int64_t i = 0; i < p.half; ++i) {
      // HF's float32 matmul inv_freq @ position: one rounded product per angle.
      const double angle = static_cast<double>(pos * p.inv_freq[i]);
      p.cos[t * p.half + i] = static_cast<float>(std::cos(angle));
      p.sin[t * p.half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

}  // namespace kiln::cpu
