// The general attention kernel (see attention_kernels.h), compiled once per Highway
// target: flash-attention style, never materialising the L x S score matrix.
//
// A work item is (row, block of Lb = 4 vectors of queries). Its queries are stored
// transposed, Q^T [E][Lb], pre-multiplied by the scale, so a score tile S^T [Sb][Lb]
// comes from broadcasting one key element against Q^T's vectors: the softmax then
// runs down the key axis with the query rows in lanes (plain vector max/add, no
// horizontal reductions), and K needs no transposition. Per key tile: scores, bias /
// causal mask, online softmax (running max m, sum l, rescale alpha = e^(m_old - m_new)),
// optional dropout, then acc = acc * alpha + P V. Key tiles past a causal block's
// last query are skipped. Query blocks of a row are handed out in zig-zag order
// (first, last, second, ...) so contiguous static chunks get equal causal work.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/attention/attention_prefill.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/attention/attention-inl.h"
#include "backend/cpu/attention/attention_kernels.h"
#include "backend/cpu/common/random.h"
#include "kiln/scalar_types.h"
#include "kiln/thread_pool.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Query vectors per block: 4 x 16 = 64 float32 rows on AVX-512.
constexpr int kRowVecs = 4;
// Keys per tile.
constexpr int64_t kKeyTile = 64;

// S^T rows j..j+KB (keys) over all Lb query lanes: st[(j + t) * lb + i] = sum_e qt[e][i] k_t[e].
template <int KB, class D, typename C = hn::TFromD<D>>
HWY_INLINE void ScoreKeys(D d, const C* HWY_RESTRICT qt, int64_t lb, int64_t E, const C* const* krow,
                          C* HWY_RESTRICT st) {
  const size_t N = hn::Lanes(d);
  hn::Vec<D> a[KB][kRowVecs];
  for (int t = 0; t < KB; ++t)
    for (int v = 0; v < kRowVecs; ++v) a[t][v] = hn::Zero(d);
  for (int64_t e = 0; e < E; ++e) {
    hn::Vec<D> qv[kRowVecs];
    for (int v = 0; v < kRowVecs; ++v) qv[v] = hn::LoadU(d, qt + e * lb + v * N);
    for (int t = 0; t < KB; ++t) {
      const auto kb = hn::Set(d, krow[t][e]);
      for (int v = 0; v < kRowVecs; ++v) a[t][v] = hn::MulAdd(qv[v], kb, a[t][v]);
    }
  }
  for (int t = 0; t < KB; ++t)
    for (int v = 0; v < kRowVecs; ++v) hn::StoreU(a[t][v], d, st + t * lb + v * N);
}

template <typename T>
struct Scratch {
  using C = AttnCompute<T>;
  std::vector<C> qrow, qt, kp, vp, st, acc, m, l, alpha;
  std::vector<float> uniform;
};

template <typename T>
void ProcessQueryBlock(const AttentionProblem& p, ThreadPool& pool, int64_t r, int64_t i0, int64_t lb,
                       Scratch<T>& s) {
  using C = AttnCompute<T>;
  const hn::ScalableTag<C> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t E = p.E, Ev = p.Ev, ev_pad = PadToLanes<C>(Ev);
  const int64_t nL = std::min(lb, p.L - i0);
  const C neg_inf = -std::numeric_limits<C>::infinity();

  // Q^T with the scale folded in; lanes past nL stay zero.
  const T* q = static_cast<const T*>(p.q) + p.q_offset[r];
  std::fill(s.qt.begin(), s.qt.end(), C(0));
  for (int64_t i = 0; i < nL; ++i) {
    WidenRow<T>(q + (i0 + i) * p.q_stride_l, E, E, static_cast<C>(p.scale), s.qrow.data());
    for (int64_t e = 0; e < E; ++e) s.qt[e * lb + i] = s.qrow[e];
  }
  std::fill(s.m.begin(), s.m.end(), neg_inf);
  std::fill(s.l.begin(), s.l.end(), C(0));
  std::fill(s.acc.begin(), s.acc.end(), C(0));

  const T* k = static_cast<const T*>(p.k) + p.k_offset[r];
  const T* v = static_cast<const T*>(p.v) + p.v_offset[r];
  const C* bias = p.bias ? static_cast<const C*>(p.bias) + p.bias_offset[r] : nullptr;
  const int64_t key_end = p.causal ? std::min(p.S, i0 + nL) : p.S;
  const C keep = static_cast<C>(1.0 - p.dropout_p);
  const C inv_keep = C(1) / keep;

  const C* krow[kKeyTile];
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
    const int64_t nS = std::min(kKeyTile, key_end - j0);
    for (int64_t j = 0; j < nS; ++j) {
      const T* src = k + (j0 + j) * p.k_stride_s;
      if constexpr (std::is_same_v<T, C>) {
        krow[j] = src;
      } else {
        WidenRow<T>(src, E, E, C(1), s.kp.data() + j * E);
        krow[j] = s.kp.data() + j * E;
      }
      WidenRow<T>(v + (j0 + j) * p.v_stride_s, Ev, ev_pad, C(1), s.vp.data() + j * ev_pad);
    }
    C* st = s.st.data();
    int64_t j = 0;
    for (; j + 4 <= nS; j += 4) ScoreKeys<4>(d, s.qt.data(), lb, E, krow + j, st + j * lb);
    for (; j < nS; ++j) ScoreKeys<1>(d, s.qt.data(), lb, E, krow + j, st + j * lb);

    if (bias) {
      for (int64_t jj = 0; jj < nS; ++jj) {
        const C* b = bias + i0 * p.bias_stride_l + (j0 + jj) * p.bias_stride_s;
        for (int64_t i = 0; i < nL; ++i) st[jj * lb + i] += b[i * p.bias_stride_l];
      }
    }
    if (p.causal && j0 + nS - 1 > i0) {
      // Key j0 + jj is hidden from queries i0 + i < j0 + jj.
      const auto ninf = hn::Set(d, neg_inf);
      for (int64_t jj = 0; jj < nS; ++jj) {
        const auto key = hn::Set(d, static_cast<C>(j0 + jj));
        for (int vv = 0; vv < kRowVecs; ++vv) {
          const auto query = hn::Iota(d, static_cast<C>(i0 + vv * N));
          C* row = st + jj * lb + vv * N;
          hn::StoreU(hn::IfThenElse(hn::Lt(query, key), ninf, hn::LoadU(d, row)), d, row);
        }
      }
    }

    // Online softmax down the key axis, query rows in lanes.
    for (int vv = 0; vv < kRowVecs; ++vv) {
      const int64_t off = vv * N;
      const auto m_old = hn::LoadU(d, s.m.data() + off);
      auto mx = m_old;
      for (int64_t jj = 0; jj < nS; ++jj) mx = hn::Max(mx, hn::LoadU(d, st + jj * lb + off));
      // A row with nothing visible yet keeps max -inf; subtracting 0 then gives e^-inf = 0.
      const auto m_use = hn::IfThenZeroElse(hn::Eq(mx, hn::Set(d, neg_inf)), mx);
      auto sum = hn::Zero(d);
      for (int64_t jj = 0; jj < nS; ++jj) {
        const auto pj = AttnExp(d, hn::Sub(hn::LoadU(d, st + jj * lb + off), m_use));
        hn::StoreU(pj, d, st + jj * lb + off);
        sum = hn::Add(sum, pj);
      }
      const auto alpha = AttnExp(d, hn::Sub(m_old, m_use));
      hn::StoreU(hn::MulAdd(hn::LoadU(d, s.l.data() + off), alpha, sum), d, s.l.data() + off);
      hn::StoreU(alpha, d, s.alpha.data() + off);
      hn::StoreU(mx, d, s.m.data() + off);
    }

    if (p.dropout_p > 0) {
      // The sum l keeps the undropped weights: dropout acts after the normalisation.
      for (int64_t i = 0; i < nL; ++i) {
        const uint64_t first = static_cast<uint64_t>(((r * p.L) + i0 + i) * p.S + j0);
        const int64_t skip = static_cast<int64_t>(first % 4);
        fill_uniform_f32(pool, {p.dropout_key.seed, p.dropout_key.offset + first / 4}, s.uniform.data(),
                         skip + nS);
        for (int64_t jj = 0; jj < nS; ++jj) {
          C& w = st[jj * lb + i];
          w = static_cast<C>(s.uniform[skip + jj]) < keep ? w * inv_keep : C(0);
        }
      }
    }
    AccumulatePV(d, st, 1, lb, nL, nS, s.vp.data(), ev_pad, s.alpha.data(), s.acc.data());
  }

  T* out = static_cast<T*>(p.out) + (r * p.L + i0) * Ev;
  for (int64_t i = 0; i < nL; ++i) {
    C* a = s.acc.data() + i * ev_pad;
    // l == 0: every key of the row was masked (or S == 0): zeros, kiln decision 5. A NaN
    // or +inf score left l NaN (e^NaN, e^(inf - inf)): the row is NaN, as softmax gives.
    const bool hidden = s.l[i] == C(0);
    const C inv = hidden ? C(0) : C(1) / s.l[i];
    for (int64_t c = 0; c < Ev; ++c) a[c] = hidden ? C(0) : a[c] * inv;
    NarrowRow<T>(a, Ev, out + i * Ev);
  }
}

template <typename T>
void AttentionGeneral(const AttentionProblem& p, ThreadPool& pool) {
  using C = AttnCompute<T>;
  const int64_t lb = kRowVecs * static_cast<int64_t>(hn::Lanes(hn::ScalableTag<C>()));
  const int64_t q_blocks = ceil_div(p.L, lb);
  const int64_t ev_pad = PadToLanes<C>(p.Ev);
  pool.parallel_for(p.rows * q_blocks, 1, [&](int64_t begin, int64_t end) {
    Scratch<T> s;
    s.qrow.resize(static_cast<size_t>(std::max<int64_t>(p.E, 1)));
    s.qt.resize(static_cast<size_t>(p.E * lb));
    s.kp.resize(static_cast<size_t>(kKeyTile * p.E));
    s.vp.resize(static_cast<size_t>(kKeyTile * ev_pad));
    s.st.resize(static_cast<size_t>(kKeyTile * lb));
    s.acc.resize(static_cast<size_t>(lb * ev_pad));
    s.m.resize(static_cast<size_t>(lb));
    s.l.resize(static_cast<size_t>(lb));
    s.alpha.resize(static_cast<size_t>(lb));
    if (p.dropout_p > 0) s.uniform.resize(static_cast<size_t>(kKeyTile + 4));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / q_blocks, t = item % q_blocks;
      const int64_t qb = t % 2 == 0 ? t / 2 : q_blocks - 1 - t / 2;
      ProcessQueryBlock<T>(p, pool, r, qb * lb, lb, s);
    }
  });
}

void AttentionGeneralF32(const AttentionProblem& p, ThreadPool& pool) { AttentionGeneral<float>(p, pool); }
void AttentionGeneralF64(const AttentionProblem& p, ThreadPool& pool) { AttentionGeneral<double>(p, pool); }
void AttentionGeneralBF16(const AttentionProblem& p, ThreadPool& pool) { AttentionGeneral<BFloat16>(p, pool); }
void AttentionGeneralF16(const AttentionProblem& p, ThreadPool& pool) { AttentionGeneral<Half>(p, pool); }

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu {

HWY_EXPORT(AttentionGeneralF32);
HWY_EXPORT(AttentionGeneralF64);
HWY_EXPORT(AttentionGeneralBF16);
HWY_EXPORT(AttentionGeneralF16);

void attention_general_cpu(const AttentionProblem& p, ThreadPool& pool) {
  switch (p.dtype) {
    case DType::Float32: return HWY_DYNAMIC_DISPATCH(AttentionGeneralF32)(p, pool);
    case DType::Float64: return HWY_DYNAMIC_DISPATCH(AttentionGeneralF64)(p, pool);
    case DType::BFloat16: return HWY_DYNAMIC_DISPATCH(AttentionGeneralBF16)(p, pool);
    case DType::Float16: return HWY_DYNAMIC_DISPATCH(AttentionGeneralF16)(p, pool);
    default: break;
  }
}

}  // namespace kiln::cpu
#endif  // HWY_ONCE
