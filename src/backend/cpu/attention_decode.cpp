// The fused decode attention kernel (L == 1, see attention_kernels.h), compiled once
// per Highway target.
//
// Decode is a bandwidth race: each K/V element is used once per query head, so the
// kernel's job is to stream the cache once. Rows (query heads) that read the same K/V
// (a GQA group, or heads broadcast over one K/V head) form a group of up to
// kMaxGroup rows; a group's context is cut into slices, and a work item is (group,
// slice). Per tile of kKeyTile keys the item widens K and V to the compute dtype in L1
// scratch (bf16/f16 are read at their storage width, once), takes the dot product of
// every query of the group with each key, updates each row's running max / sum, and
// accumulates P V. Each item leaves (max, sum, acc) per row; a final pass merges the
// slices: out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/attention_decode.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/attention-inl.h"
#include "backend/cpu/attention_kernels.h"
#include "kiln/scalar_types.h"
#include "kiln/thread_pool.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kMaxGroup = 8;
constexpr int64_t kKeyTile = 32;
// A slice has at least this many keys, so the merge stays negligible.
constexpr int64_t kMinSlice = 256;

// sc[t * sc_stride + j] = q_t . k_j for RB query rows (padded, e_pad long) and one key.
template <int RB, class D, typename C = hn::TFromD<D>>
HWY_INLINE void ScoreRows(D d, const C* HWY_RESTRICT qs, int64_t e_pad, const C* HWY_RESTRICT kj, C* sc,
                          int64_t sc_stride) {
  const size_t N = hn::Lanes(d);
  hn::Vec<D> a[RB], b[RB];
  for (int t = 0; t < RB; ++t) a[t] = b[t] = hn::Zero(d);
  // Two accumulators per row halve the FMA dependency chain.
  size_t e = 0;
  for (; e + 2 * N <= static_cast<size_t>(e_pad); e += 2 * N) {
    const auto k0 = hn::LoadU(d, kj + e), k1 = hn::LoadU(d, kj + e + N);
    for (int t = 0; t < RB; ++t) {
      a[t] = hn::MulAdd(hn::LoadU(d, qs + t * e_pad + e), k0, a[t]);
      b[t] = hn::MulAdd(hn::LoadU(d, qs + t * e_pad + e + N), k1, b[t]);
    }
  }
  if (e < static_cast<size_t>(e_pad)) {
    const auto k0 = hn::LoadU(d, kj + e);
    for (int t = 0; t < RB; ++t) a[t] = hn::MulAdd(hn::LoadU(d, qs + t * e_pad + e), k0, a[t]);
  }
  for (int t = 0; t < RB; ++t) sc[t * sc_stride] = hn::GetLane(hn::SumOfLanes(d, hn::Add(a[t], b[t])));
}

template <typename T>
struct DecodeScratch {
  using C = AttnCompute<T>;
  std::vector<C> qs, kp, vp, sc, acc, alpha;
};

// One (group, slice) item: rows [row0, row0 + R) over keys [s0, s1). Leaves the
// unnormalised acc, the max and the sum of each row in the partial arrays.
template <typename T>
void DecodeSlice(const AttentionProblem& p, int64_t row0, int64_t R, int64_t s0, int64_t s1,
                 DecodeScratch<T>& s, AttnCompute<T>* part_acc, AttnCompute<T>* part_m, AttnCompute<T>* part_l,
                 int64_t part_stride) {
  using C = AttnCompute<T>;
  const hn::ScalableTag<C> d;
  const int64_t E = p.E, Ev = p.Ev, e_pad = PadToLanes<C>(E), ev_pad = PadToLanes<C>(Ev);
  const C neg_inf = -std::numeric_limits<C>::infinity();
  for (int64_t t = 0; t < R; ++t) {
    const T* q = static_cast<const T*>(p.q) + p.q_offset[row0 + t];
    WidenRow<T>(q, E, e_pad, static_cast<C>(p.scale), s.qs.data() + t * e_pad);
  }
  C m[kMaxGroup], l[kMaxGroup];
  for (int64_t t = 0; t < R; ++t) {
    m[t] = neg_inf;
    l[t] = C(0);
  }
  std::fill(s.acc.begin(), s.acc.begin() + R * ev_pad, C(0));
  const T* k = static_cast<const T*>(p.k) + p.k_offset[row0];
  const T* v = static_cast<const T*>(p.v) + p.v_offset[row0];

  for (int64_t j0 = s0; j0 < s1; j0 += kKeyTile) {
    const int64_t nS = std::min(kKeyTile, s1 - j0);
    for (int64_t j = 0; j < nS; ++j) {
      C* kj = s.kp.data() + j * e_pad;
      WidenRow<T>(k + (j0 + j) * p.k_stride_s, E, e_pad, C(1), kj);
      int64_t t = 0;
      for (; t + 4 <= R; t += 4) ScoreRows<4>(d, s.qs.data() + t * e_pad, e_pad, kj, s.sc.data() + t * kKeyTile + j, kKeyTile);
      for (; t < R; ++t) ScoreRows<1>(d, s.qs.data() + t * e_pad, e_pad, kj, s.sc.data() + t * kKeyTile + j, kKeyTile);
    }
    for (int64_t j = 0; j < nS; ++j)
      WidenRow<T>(v + (j0 + j) * p.v_stride_s, Ev, ev_pad, C(1), s.vp.data() + j * ev_pad);
    for (int64_t t = 0; t < R; ++t) {
      C* sc = s.sc.data() + t * kKeyTile;
      C mx = m[t];
      for (int64_t j = 0; j < nS; ++j) mx = std::max(mx, sc[j]);
      // Scores are finite unless the data is not; a max of -inf keeps e^-inf = 0.
      const C m_use = mx == neg_inf ? C(0) : mx;
      C sum = 0;
      const size_t N = hn::Lanes(d);
      int64_t j = 0;
      for (; j + static_cast<int64_t>(N) <= nS; j += static_cast<int64_t>(N)) {
        const auto pj = AttnExp(d, hn::Sub(hn::LoadU(d, sc + j), hn::Set(d, m_use)));
        hn::StoreU(pj, d, sc + j);
        sum += hn::GetLane(hn::SumOfLanes(d, pj));
      }
      for (; j < nS; ++j) {
        sc[j] = std::exp(sc[j] - m_use);
        sum += sc[j];
      }
      const C alpha = std::exp(m[t] - m_use);
      l[t] = l[t] * alpha + sum;
      m[t] = mx;
      s.alpha[t] = alpha;
    }
    AccumulatePV(d, s.sc.data(), kKeyTile, 1, R, nS, s.vp.data(), ev_pad, s.alpha.data(), s.acc.data());
  }
  for (int64_t t = 0; t < R; ++t) {
    std::copy(s.acc.begin() + t * ev_pad, s.acc.begin() + t * ev_pad + Ev, part_acc + t * part_stride * Ev);
    part_m[t * part_stride] = m[t];
    part_l[t * part_stride] = l[t];
  }
}

template <typename T>
void AttentionDecode(const AttentionProblem& p, ThreadPool& pool) {
  using C = AttnCompute<T>;
  // Groups: runs of consecutive rows with the same K and V.
  std::vector<int64_t> group_start;
  for (int64_t r = 0; r < p.rows; ++r) {
    if (r == 0 || p.k_offset[r] != p.k_offset[r - 1] || p.v_offset[r] != p.v_offset[r - 1] ||
        r - group_start.back() == kMaxGroup)
      group_start.push_back(r);
  }
  const int64_t groups = static_cast<int64_t>(group_start.size());
  group_start.push_back(p.rows);
  // Enough items that every thread has two, but no slice under kMinSlice keys.
  const int64_t want = (2 * pool.num_threads() + groups - 1) / groups;
  const int64_t slices = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, p.S / kMinSlice));
  const int64_t slice_len = (p.S + slices - 1) / slices;

  // part[(row * slices + slice)]: acc (Ev), max and sum.
  std::vector<C> part_acc(static_cast<size_t>(p.rows * slices * p.Ev));
  std::vector<C> part_m(static_cast<size_t>(p.rows * slices)), part_l(part_m.size());
  const int64_t e_pad = PadToLanes<C>(p.E), ev_pad = PadToLanes<C>(p.Ev);
  pool.parallel_for(groups * slices, 1, [&](int64_t begin, int64_t end) {
    DecodeScratch<T> s;
    s.qs.resize(static_cast<size_t>(kMaxGroup * e_pad));
    s.kp.resize(static_cast<size_t>(kKeyTile * e_pad));
    s.vp.resize(static_cast<size_t>(kKeyTile * ev_pad));
    s.sc.resize(static_cast<size_t>(kMaxGroup * kKeyTile));
    s.acc.resize(static_cast<size_t>(kMaxGroup * ev_pad));
    s.alpha.resize(static_cast<size_t>(kMaxGroup));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t g = item / slices, sl = item % slices;
      const int64_t row0 = group_start[g], R = group_start[g + 1] - row0;
      const int64_t s0 = sl * slice_len, s1 = std::min(p.S, s0 + slice_len);
      const size_t at = static_cast<size_t>(row0 * slices + sl);
      if (s0 >= s1) {
        for (int64_t t = 0; t < R; ++t) {
          part_m[at + t * slices] = -std::numeric_limits<C>::infinity();
          part_l[at + t * slices] = C(0);
          std::fill_n(part_acc.begin() + (at + t * slices) * p.Ev, p.Ev, C(0));
        }
        continue;
      }
      DecodeSlice<T>(p, row0, R, s0, s1, s, part_acc.data() + at * p.Ev, part_m.data() + at, part_l.data() + at,
                     slices);
    }
  });

  // Merge the slices of each row in double, then round once.
  T* out = static_cast<T*>(p.out);
  pool.parallel_for(p.rows, 64, [&](int64_t begin, int64_t end) {
    std::vector<C> row(static_cast<size_t>(p.Ev));
    std::vector<double> w(static_cast<size_t>(slices));
    for (int64_t r = begin; r < end; ++r) {
      const C* m = part_m.data() + r * slices;
      const C* l = part_l.data() + r * slices;
      C M = -std::numeric_limits<C>::infinity();
      for (int64_t sl = 0; sl < slices; ++sl) M = std::max(M, m[sl]);
      double total = 0;
      for (int64_t sl = 0; sl < slices; ++sl) {
        w[sl] = m[sl] == -std::numeric_limits<C>::infinity() ? 0.0 : std::exp(static_cast<double>(m[sl]) - M);
        total += w[sl] * l[sl];
      }
      for (int64_t c = 0; c < p.Ev; ++c) {
        double a = 0;
        for (int64_t sl = 0; sl < slices; ++sl) a += w[sl] * part_acc[(r * slices + sl) * p.Ev + c];
        // total == 0: no key had a finite score: zeros, as for a fully masked row.
        row[c] = total > 0 ? static_cast<C>(a / total) : C(0);
      }
      NarrowRow<T>(row.data(), p.Ev, out + r * p.Ev);
    }
  });
}

void AttentionDecodeF32(const AttentionProblem& p, ThreadPool& pool) { AttentionDecode<float>(p, pool); }
void AttentionDecodeF64(const AttentionProblem& p, ThreadPool& pool) { AttentionDecode<double>(p, pool); }
void AttentionDecodeBF16(const AttentionProblem& p, ThreadPool& pool) { AttentionDecode<BFloat16>(p, pool); }
void AttentionDecodeF16(const AttentionProblem& p, ThreadPool& pool) { AttentionDecode<Half>(p, pool); }

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(AttentionDecodeF32);
HWY_EXPORT(AttentionDecodeF64);
HWY_EXPORT(AttentionDecodeBF16);
HWY_EXPORT(AttentionDecodeF16);

void attention_decode_cpu(const AttentionProblem& p, ThreadPool& pool) {
  switch (p.dtype) {
    case DType::Float32: return HWY_DYNAMIC_DISPATCH(AttentionDecodeF32)(p, pool);
    case DType::Float64: return HWY_DYNAMIC_DISPATCH(AttentionDecodeF64)(p, pool);
    case DType::BFloat16: return HWY_DYNAMIC_DISPATCH(AttentionDecodeBF16)(p, pool);
    case DType::Float16: return HWY_DYNAMIC_DISPATCH(AttentionDecodeF16)(p, pool);
    default: break;
  }
}

int64_t attention_simd_targets() { return HWY_TARGETS; }

}  // namespace kiln::cpu
#endif  // HWY_ONCE
