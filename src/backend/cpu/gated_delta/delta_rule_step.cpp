// The recurrent gated delta rule for one head and token (delta_rule_step.h), once per
// Highway target.
//
// A decode step meets each head's state (64 KiB at dk = dv = 128) cold, so its time is
// the memory's: the state is read once and written back once. The columns of S are
// independent (delta's column c needs only column c of S^T k), so the kernel takes a
// block of columns at a time (a whole 128-wide row on 512-bit targets) and:
//   1. reads the block row by row, front to back, accumulating S^T k and S^T q in
//      registers (one multiply-add each per element);
//   2. forms delta and the output for the block in registers;
//   3. rewrites the block row by row while it is still in L1/L2.
// Software prefetch of the next head's state during step 3 was measured and left out: it
// made the step ~20% slower (the hardware prefetcher already streams the rows).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/gated_delta/delta_rule_step.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/gated_delta/delta_rule_step.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Vectors per column block: the S^T k and S^T q accumulators of a block must stay in
// registers (16 of AVX-512's 32, 8 of AVX2's 16).
constexpr int kBlockVectors = HWY_MAX_BYTES >= 64 ? 8 : 4;

struct StepArgs {
  const float* q;
  const float* k;
  float kq;
  const float* v;
  float decay;
  float beta;
  float* S;
  int64_t dk;
  int64_t dv;
  float* out;
};

template <int kVecs>
HWY_INLINE void Block(const StepArgs& a, int64_t c0) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  V sk[kVecs], sq[kVecs];
  for (int i = 0; i < kVecs; ++i) {
    sk[i] = hn::Zero(d);
    sq[i] = hn::Zero(d);
  }
  for (int64_t r = 0; r < a.dk; ++r) {
    const float* row = a.S + r * a.dv + c0;
    const V kr = hn::Set(d, a.k[r]), qr = hn::Set(d, a.q[r]);
    for (int i = 0; i < kVecs; ++i) {
      const V s = hn::LoadU(d, row + i * N);
      sk[i] = hn::MulAdd(s, kr, sk[i]);
      sq[i] = hn::MulAdd(s, qr, sq[i]);
    }
  }
  const V decay = hn::Set(d, a.decay), beta = hn::Set(d, a.beta), kq = hn::Set(d, a.kq);
  V delta[kVecs];
  for (int i = 0; i < kVecs; ++i) {
    delta[i] = hn::Mul(beta, hn::NegMulAdd(decay, sk[i], hn::LoadU(d, a.v + c0 + i * N)));
    hn::StoreU(hn::MulAdd(decay, sq[i], hn::Mul(delta[i], kq)), d, a.out + c0 + i * N);
  }
  for (int64_t r = 0; r < a.dk; ++r) {
    float* row = a.S + r * a.dv + c0;
    const V kr = hn::Set(d, a.k[r]);
    for (int i = 0; i < kVecs; ++i) {
      const V s = hn::LoadU(d, row + i * N);
      hn::StoreU(hn::MulAdd(decay, s, hn::Mul(kr, delta[i])), d, row + i * N);
    }
  }
}

// Columns past the last whole vector (dv not a multiple of the lane count), one at a time.
void TailColumns(const StepArgs& a, int64_t c0) {
  for (int64_t c = c0; c < a.dv; ++c) {
    float sk = 0.0f, sq = 0.0f;
    for (int64_t r = 0; r < a.dk; ++r) {
      sk += a.S[r * a.dv + c] * a.k[r];
      sq += a.S[r * a.dv + c] * a.q[r];
    }
    const float delta = a.beta * (a.v[c] - a.decay * sk);
    a.out[c] = a.decay * sq + delta * a.kq;
    for (int64_t r = 0; r < a.dk; ++r) a.S[r * a.dv + c] = a.decay * a.S[r * a.dv + c] + a.k[r] * delta;
  }
}

void DeltaRuleStep(const float* q, const float* k, float kq, const float* v, float decay, float beta, float* S,
                   int64_t dk, int64_t dv, float* out) {
  const StepArgs a{q, k, kq, v, decay, beta, S, dk, dv, out};
  const int64_t N = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  int64_t c = 0;
  for (; c + kBlockVectors * N <= dv; c += kBlockVectors * N) Block<kBlockVectors>(a, c);
  if constexpr (kBlockVectors > 4) {
    for (; c + 4 * N <= dv; c += 4 * N) Block<4>(a, c);
  }
  for (; c + 2 * N <= dv; c += 2 * N) Block<2>(a, c);
  for (; c + N <= dv; c += N) Block<1>(a, c);
  TailColumns(a, c);
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(DeltaRuleStep);

void delta_rule_step(const float* q, const float* k, float kq, const float* v, float decay, float beta, float* S,
                     int64_t dk, int64_t dv, float* out) {
  HWY_DYNAMIC_DISPATCH(DeltaRuleStep)(q, k, kq, v, decay, beta, S, dk, dv, out);
}

void delta_rule_step_scalar(const float* q, const float* k, float kq, const float* v, float decay, float beta,
                            float* S, int64_t dk, int64_t dv, float* out) {
  for (int64_t c = 0; c < dv; ++c) {
    float sk = 0.0f, sq = 0.0f;
    for (int64_t r = 0; r < dk; ++r) {
      sk += S[r * dv + c] * k[r];
      sq += S[r * dv + c] * q[r];
    }
    const float delta = beta * (v[c] - decay * sk);
    out[c] = decay * sq + delta * kq;
    for (int64_t r = 0; r < dk; ++r) S[r * dv + c] = decay * S[r * dv + c] + k[r] * delta;
  }
}

int64_t delta_rule_step_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
