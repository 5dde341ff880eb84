// Decay weighting of a chunk's system and scores (chunk_decay.h): one e^{G_i - G_j} per
// pair, shared by both matrices, from the vector exp of fast_exp-inl.h (within 2 ulp of
// std::exp; the scalar std::exp loop was a tenth of the chunked prefill).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/gated_delta/chunk_decay.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "backend/cpu/common/fast_exp-inl.h"
#include "backend/cpu/gated_delta/chunk_decay.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void WeightChunkRows(const float* G, const float* beta, int64_t n, int64_t C, const float* A_in, const float* P_in,
                     float* A, float* P) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = 0; i < n; ++i) {
    const float* a_in = A_in + i * C;
    const float* s_in = P_in + i * C;
    float* a = A + i * C;
    float* s = P + i * C;
    const auto gi = hn::Set(d, G[i]);
    const auto bi = hn::Set(d, beta[i]);
    for (int64_t j = 0; j < i; j += N) {
      const auto mask = hn::FirstN(d, static_cast<size_t>(i - j));
      // e^{G_i - G_j} <= 1 for decays g <= 0; the overflow-checked exp keeps any other
      // input's result an honest inf rather than a wrapped exponent.
      const auto decay = FastExp<true>(d, hn::Sub(gi, hn::MaskedLoad(mask, d, G + j)));
      hn::BlendedStore(hn::Mul(hn::MaskedLoad(mask, d, a_in + j), hn::Mul(bi, decay)), mask, d, a + j);
      hn::BlendedStore(hn::Mul(hn::MaskedLoad(mask, d, s_in + j), decay), mask, d, s + j);
    }
    std::fill(a + i, a + C, 0.0f);
    s[i] = s_in[i];
    std::fill(s + i + 1, s + C, 0.0f);
  }
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(WeightChunkRows);

void weight_chunk_rows(const float* G, const float* beta, int64_t n, int64_t C, const float* A_in, const float* P_in,
                       float* A, float* P) {
  HWY_DYNAMIC_DISPATCH(WeightChunkRows)(G, beta, n, C, A_in, P_in, A, P);
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
