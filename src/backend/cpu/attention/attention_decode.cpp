// The fused decode attention kernel (L == 1, see attention_kernels.h), compiled once
// per Highway target.
//
// Decode is a bandwidth race: each K/V element is used once per query head, so the
// kernel's job is to stream the cache once, with few enough instructions per byte that
// the core keeps its cache-line fills in flight. Rows (query heads) that read the same
// K/V (a GQA group, or heads broadcast over one K/V head) form a group of up to
// kMaxGroup rows; a group's context is cut into slices, and a work item is (group,
// slice). An item walks its keys in blocks of one vector's lane count (16 f32 keys on
// AVX-512):
//   - scores: each K row is loaded (and widened) once and multiplied into the partial
//     dot products of kRowTile query rows at a time; the per-(row, key) partial vectors
//     are summed by a transpose-reduce tree (interleaves inside 128-bit blocks, then
//     block shuffles) that leaves lane j of one vector holding q . k_j, instead of one
//     horizontal sum per (row, key);
//   - online softmax once per block and row: one vector exp, the running sum kept as a
//     vector, and the max reduced and the accumulators rescaled only when a score
//     exceeds the running max;
//   - P V: the rows' accumulators stay in registers across the block's keys, each V
//     row loaded once per tile of chunks and broadcast-multiplied by each row's weight;
//   - software prefetch of the rows kPrefetchBytes ahead, one row per key processed.
// Per key and 4 query heads of dim 80 that is 40 FMAs, 10 K/V vector loads (bf16:
// widened with a zero-extend and a shift), ~12 tree shuffles and adds, and the
// prefetches: ~9 ns per (key, 4 heads) on one Zen 5 core with the cache in L2, against
// the 6.3 ns the FMAs alone need, so a bf16 cache is close to compute-bound on two
// cores. (AVX512-BF16's vdpbf16ps for the scores measured slower: it issues ~0.6 per
// cycle against ~2 FMAs.) K/V rows are read in place at their storage width when E and
// Ev are lane multiples; other head dims widen each block into zero-padded L1 scratch.
// An item covering the whole context writes its output rows; otherwise it leaves (max,
// sum, acc) per row and a final pass merges the slices:
// out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/attention/attention_decode.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/attention/attention-inl.h"
#include "backend/cpu/common/codecs-inl.h"
#include "backend/cpu/attention/attention_kernels.h"
#include "kiln/scalar_types.h"
#include "kiln/thread_pool.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kMaxGroup = 8;
// A slice has at least this many keys, so the merge stays negligible.
constexpr int64_t kMinSlice = 256;
// How far ahead the rows are prefetched (per stream, K and V): measured best on Zen 5
// for bf16 and f32 alike (32 bf16 or 16 f32 keys of head dim 80); half or twice as far
// loses 5-10%.
constexpr int64_t kPrefetchBytes = 5120;

// Query rows sharing each K/V load, and V chunks (vectors) per accumulator tile: sized
// so the accumulators, the loaded K/V vectors and the broadcast weights fit the
// register file (32 vectors on AVX-512, 16 on AVX2).
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kRowTile = 4;
constexpr int kMaxChunkTile = 5;
#else
constexpr int kRowTile = 2;
constexpr int kMaxChunkTile = 2;
#endif

// Keys whose partial vectors the first tree levels combine: the lanes of one 128-bit block.
template <typename C>
constexpr size_t KeysPerGroup() {
#if HWY_TARGET == HWY_SCALAR
  return 1;
#else
  return 16 / sizeof(C);
#endif
}

using codecs::LoadWidened;

// Level one of the tree: v[0..G) -> one vector whose lane i of each 128-bit block is the
// sum of that block of v[i] (G = KeysPerGroup).
template <class D>
HWY_INLINE hn::Vec<D> ReduceWithinBlocks(D d, const hn::Vec<D>* v) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return v[0];
#else
  if constexpr (sizeof(hn::TFromD<D>) == 8) {
    return hn::Add(hn::InterleaveLower(v[0], v[1]), hn::InterleaveUpper(d, v[0], v[1]));
  } else {
    // [a0+a2, b0+b2, a1+a3, b1+b3] per block, then 64-bit interleaves pair the halves.
    const auto ab = hn::Add(hn::InterleaveLower(v[0], v[1]), hn::InterleaveUpper(d, v[0], v[1]));
    const auto cd = hn::Add(hn::InterleaveLower(v[2], v[3]), hn::InterleaveUpper(d, v[2], v[3]));
    const hn::RepartitionToWide<D> dw;
    const auto abw = hn::BitCast(dw, ab), cdw = hn::BitCast(dw, cd);
    return hn::Add(hn::BitCast(d, hn::InterleaveLower(abw, cdw)), hn::BitCast(d, hn::InterleaveUpper(dw, abw, cdw)));
  }
#endif
}

// Block fold: [w.b0 + w.b2, w.b1 + w.b3] of w0 in the lower half, of w1 in the upper
// (or [w0.b0 + w0.b1, w1.b0 + w1.b1] for two-block vectors).
template <class D>
HWY_INLINE hn::Vec<D> FoldHalves(D d, hn::Vec<D> w0, hn::Vec<D> w1) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  (void)w1;
  return w0;
#else
  return hn::Add(hn::ConcatLowerLower(d, w1, w0), hn::ConcatUpperUpper(d, w1, w0));
#endif
}

// Four-block vectors: a = FoldHalves(w0, w2), b = FoldHalves(w1, w3) -> block i holds the
// total of w_i.
template <class D>
HWY_INLINE hn::Vec<D> FoldQuarters(hn::Vec<D> a, hn::Vec<D> b) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return hn::Add(hn::OddEvenBlocks(b, a), hn::SwapAdjacentBlocks(hn::OddEvenBlocks(a, b)));
#else
  (void)b;
  return a;  // never called: only AVX-512 vectors have four blocks
#endif
}

// Software prefetch of the rows of a block ahead, one row at a time: rows [0, n) at
// base + i * stride_bytes, row_bytes each (base == nullptr: none). The kernels issue one
// row's prefetches per key they process, so the cache-line fills stay spread over the
// block instead of arriving in one burst. Kernel alone on two Zen 5 cores, the cache
// cold (best quartile of many calls): issuing a whole block's worth at its start gave
// ~35 GB/s for bf16 and f32, spreading them ~50 GB/s; leaving every other line to the
// hardware prefetchers halves the bandwidth. Prefetches never fault.
struct RowPrefetch {
  const char* base = nullptr;
  int64_t stride_bytes = 0, row_bytes = 0, n = 0;

  HWY_INLINE void Row(int64_t i) const {
    if (base == nullptr || i >= n) return;
    constexpr uintptr_t kLine = 64;
    const uintptr_t start = reinterpret_cast<uintptr_t>(base + i * stride_bytes);
    const uintptr_t end = start + static_cast<uintptr_t>(row_bytes);
    // Rows that tile memory (stride == row size) own the lines that start inside them,
    // so each line is fetched once; strided rows fetch every line they touch.
    uintptr_t line = stride_bytes == row_bytes ? (start + kLine - 1) & ~(kLine - 1) : start & ~(kLine - 1);
    for (; line < end; line += kLine) hwy::Prefetch(reinterpret_cast<const char*>(line));
  }
};

// Scores of RB query rows (qs + t * e_pad, widened and scaled, `chunks` vectors each)
// against the N keys at k + j * k_stride, j <= last (keys past `last` repeat it, so a
// partial block reads nothing past the slice): lane j of sc[t] is q_t . k_j. Each key
// vector is loaded once for the RB rows; the per-(row, key) partial vectors are summed
// by the transpose-reduce tree. Prefetches row j of pf while scoring key j.
template <int RB, class D, typename S, typename C = hn::TFromD<D>>
HWY_INLINE void ScoreBlock(D d, const C* HWY_RESTRICT qs, int64_t e_pad, int64_t chunks, const S* HWY_RESTRICT k,
                           int64_t k_stride, int64_t last, const RowPrefetch& pf, hn::Vec<D>* sc) {
  using V = hn::Vec<D>;
  constexpr size_t G = KeysPerGroup<C>();
  const size_t N = hn::Lanes(d);
  const size_t groups = N / G;
  // Partial dot products of G keys, then level one of the tree.
  const auto group = [&](size_t gi, V* w) HWY_ATTR {
    const S* kr[G];
    for (size_t i = 0; i < G; ++i) {
      const int64_t j = static_cast<int64_t>(gi * G + i);
      kr[i] = k + std::min(j, last) * k_stride;
      pf.Row(j);
    }
    V acc[RB][G];
    for (int t = 0; t < RB; ++t)
      for (size_t i = 0; i < G; ++i) acc[t][i] = hn::Zero(d);
    for (int64_t c = 0; c < chunks; ++c) {
      const size_t off = static_cast<size_t>(c) * N;
      V qv[RB];
      for (int t = 0; t < RB; ++t) qv[t] = hn::LoadU(d, qs + t * e_pad + off);
      for (size_t i = 0; i < G; ++i) {
        const V kv = LoadWidened(d, kr[i] + off);
        for (int t = 0; t < RB; ++t) acc[t][i] = hn::MulAdd(qv[t], kv, acc[t][i]);
      }
    }
    for (int t = 0; t < RB; ++t) w[t] = ReduceWithinBlocks(d, acc[t]);
  };
  V w0[RB], w1[RB];
  if (groups == 1) {
    group(0, sc);
  } else if (groups == 2) {
    group(0, w0);
    group(1, w1);
    for (int t = 0; t < RB; ++t) sc[t] = FoldHalves(d, w0[t], w1[t]);
  } else {
    // Groups 0 and 2 first, so at most two sets of partial vectors are live.
    V a[RB];
    group(0, w0);
    group(2, w1);
    for (int t = 0; t < RB; ++t) a[t] = FoldHalves(d, w0[t], w1[t]);
    group(1, w0);
    group(3, w1);
    for (int t = 0; t < RB; ++t) sc[t] = FoldQuarters<D>(a[t], FoldHalves(d, w0[t], w1[t]));
  }
}

// acc rows t < RB, chunks c < CV: acc = acc * alpha[t] + sum_{j < nS} p[t * N + j] V[j],
// prefetching row j of pf with key j.
template <int RB, int CV, class D, typename S, typename C = hn::TFromD<D>>
HWY_INLINE void AccumulateBlock(D d, const C* HWY_RESTRICT p, int64_t nS, const S* HWY_RESTRICT v, int64_t v_stride,
                                const C* alpha, const RowPrefetch& pf, C* HWY_RESTRICT acc, int64_t acc_stride) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(d);
  V a[RB][CV];
  bool rescale = false;
  for (int t = 0; t < RB; ++t) rescale |= alpha[t] != C(1);
  for (int t = 0; t < RB; ++t)
    for (int c = 0; c < CV; ++c) a[t][c] = hn::LoadU(d, acc + t * acc_stride + c * N);
  if (rescale) {  // only in blocks that raised some row's max
    for (int t = 0; t < RB; ++t)
      for (int c = 0; c < CV; ++c) a[t][c] = hn::Mul(a[t][c], hn::Set(d, alpha[t]));
  }
  for (int64_t j = 0; j < nS; ++j) {
    pf.Row(j);
    V vv[CV];
    for (int c = 0; c < CV; ++c) vv[c] = LoadWidened(d, v + j * v_stride + c * N);
    for (int t = 0; t < RB; ++t) {
      const V pr = hn::Set(d, p[t * N + j]);
      for (int c = 0; c < CV; ++c) a[t][c] = hn::MulAdd(pr, vv[c], a[t][c]);
    }
  }
  for (int t = 0; t < RB; ++t)
    for (int c = 0; c < CV; ++c) hn::StoreU(a[t][c], d, acc + t * acc_stride + c * N);
}

// AccumulateBlock over all `chunks` vectors of RB rows, in tiles of at most kMaxChunkTile
// (the first tile prefetches).
template <int RB, class D, typename S, typename C = hn::TFromD<D>>
HWY_INLINE void AccumulateRows(D d, const C* p, int64_t nS, const S* v, int64_t v_stride, int64_t chunks,
                               const C* alpha, RowPrefetch pf, C* acc, int64_t acc_stride) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t c = 0;
  for (; c + kMaxChunkTile <= chunks; c += kMaxChunkTile, pf.base = nullptr)
    AccumulateBlock<RB, kMaxChunkTile>(d, p, nS, v + c * N, v_stride, alpha, pf, acc + c * N, acc_stride);
  switch (chunks - c) {
    case 1: return AccumulateBlock<RB, 1>(d, p, nS, v + c * N, v_stride, alpha, pf, acc + c * N, acc_stride);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    case 2: return AccumulateBlock<RB, 2>(d, p, nS, v + c * N, v_stride, alpha, pf, acc + c * N, acc_stride);
    case 3: return AccumulateBlock<RB, 3>(d, p, nS, v + c * N, v_stride, alpha, pf, acc + c * N, acc_stride);
    case 4: return AccumulateBlock<RB, 4>(d, p, nS, v + c * N, v_stride, alpha, pf, acc + c * N, acc_stride);
#endif
    default: return;
  }
}

template <typename T>
struct DecodeScratch {
  using C = AttnCompute<T>;
  // qs: scaled queries; kp/vp: a widened block (padded head dims only); p: weights;
  // lsum: running sums as vectors; alpha: per-block rescale; acc: P V accumulators.
  std::vector<C> qs, kp, vp, p, lsum, alpha, acc;
};

// Scores and online-softmax update of RB rows (from row t0) for one block of nS keys:
// leaves the weights in s.p and the rescale factors in s.alpha, and updates m and the
// sums. The max is reduced only when a score exceeds the running max (rarely, after
// the first blocks), so most blocks cost one compare per row instead of a reduction.
template <int RB, class D, typename S, typename T, typename C = hn::TFromD<D>>
HWY_INLINE void SoftmaxBlock(D d, int64_t t0, int64_t e_pad, int64_t chunks, const S* k, int64_t k_stride,
                             int64_t nS, const RowPrefetch& pf, DecodeScratch<T>& s, C* m) {
  using V = hn::Vec<D>;
  const size_t N = hn::Lanes(d);
  const C neg_inf = -std::numeric_limits<C>::infinity();
  V sc[RB];
  ScoreBlock<RB>(d, s.qs.data() + t0 * e_pad, e_pad, chunks, k, k_stride, nS - 1, pf, sc);
  for (int r = 0; r < RB; ++r) {
    const int64_t t = t0 + r;
    V x = sc[r];
    // Lanes past nS score a repeated key: -inf gives them weight 0.
    if (nS < static_cast<int64_t>(N))
      x = hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(nS)), x, hn::Set(d, neg_inf));
    C alpha = 1;
    if (!hn::AllFalse(d, hn::Gt(x, hn::Set(d, m[t])))) {
      const C mb = hn::GetLane(hn::MaxOfLanes(d, x));
      alpha = std::exp(m[t] - mb);  // e^-inf = 0 on the first finite block
      m[t] = mb;
    }
    // Scores are finite unless the data is not; a max of -inf keeps e^-inf = 0.
    const C m_use = m[t] == neg_inf ? C(0) : m[t];
    const V pv = AttnExp(d, hn::Sub(x, hn::Set(d, m_use)));
    hn::StoreU(pv, d, s.p.data() + t * N);
    C* l = s.lsum.data() + t * N;
    hn::StoreU(hn::MulAdd(hn::LoadU(d, l), hn::Set(d, alpha), pv), d, l);
    s.alpha[static_cast<size_t>(t)] = alpha;
  }
}

// One block of nS keys for all R rows: scores and softmax for tiles of rows, then P V.
// The first row tile prefetches pf_k's rows, the first P V tile pf_v's.
template <class D, typename S, typename T, typename C = hn::TFromD<D>>
HWY_INLINE void ProcessBlock(D d, int64_t R, int64_t e_pad, int64_t e_chunks, const S* k, int64_t k_stride,
                             const S* v, int64_t v_stride, int64_t ev_chunks, int64_t ev_pad, int64_t nS,
                             RowPrefetch pf_k, RowPrefetch pf_v, DecodeScratch<T>& s, C* m) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t t = 0;
  for (; t + kRowTile <= R; t += kRowTile, pf_k.base = nullptr)
    SoftmaxBlock<kRowTile>(d, t, e_pad, e_chunks, k, k_stride, nS, pf_k, s, m);
  for (; t < R; ++t, pf_k.base = nullptr) SoftmaxBlock<1>(d, t, e_pad, e_chunks, k, k_stride, nS, pf_k, s, m);
  for (t = 0; t + kRowTile <= R; t += kRowTile, pf_v.base = nullptr)
    AccumulateRows<kRowTile>(d, s.p.data() + t * N, nS, v, v_stride, ev_chunks, s.alpha.data() + t, pf_v,
                             s.acc.data() + t * ev_pad, ev_pad);
  for (; t < R; ++t, pf_v.base = nullptr)
    AccumulateRows<1>(d, s.p.data() + t * N, nS, v, v_stride, ev_chunks, s.alpha.data() + t, pf_v,
                      s.acc.data() + t * ev_pad, ev_pad);
}

// Where an item's rows end up: the output rows themselves when the item covers the
// whole context, else its slice's unnormalised acc, max and sum of each row (row t at
// index t * part_stride) for the merge.
template <typename T>
struct SliceResult {
  using C = AttnCompute<T>;
  T* out = nullptr;
  C *part_acc = nullptr, *part_m = nullptr, *part_l = nullptr;
  int64_t part_stride = 0;
};

// One (group, slice) item: rows [row0, row0 + R) over keys [s0, s1).
template <typename T>
void DecodeSlice(const AttentionProblem& p, int64_t row0, int64_t R, int64_t s0, int64_t s1, DecodeScratch<T>& s,
                 const SliceResult<T>& res) {
  using C = AttnCompute<T>;
  const hn::ScalableTag<C> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t E = p.E, Ev = p.Ev, e_pad = PadToLanes<C>(E), ev_pad = PadToLanes<C>(Ev);
  // Lane-multiple head dims are read in place; others go through padded scratch.
  const bool in_place = E == e_pad && Ev == ev_pad;
  const int64_t e_chunks = e_pad / N, ev_chunks = ev_pad / N;
  for (int64_t t = 0; t < R; ++t) {
    const T* q = static_cast<const T*>(p.q) + p.q_offset[row0 + t];
    WidenRow<T>(q, E, e_pad, static_cast<C>(p.scale), s.qs.data() + t * e_pad);
  }
  C m[kMaxGroup];
  std::fill_n(m, R, -std::numeric_limits<C>::infinity());
  std::fill(s.lsum.begin(), s.lsum.begin() + R * N, C(0));
  std::fill(s.acc.begin(), s.acc.begin() + R * ev_pad, C(0));
  const T* k = static_cast<const T*>(p.k) + p.k_offset[row0];
  const T* v = static_cast<const T*>(p.v) + p.v_offset[row0];
  const int64_t elem = static_cast<int64_t>(sizeof(T));
  // Prefetch the keys kPrefetchBytes ahead in the longer of the two rows.
  const int64_t ahead = std::max<int64_t>(1, kPrefetchBytes / (std::max(E, Ev) * elem));
  const auto prefetch_at = [&](const T* base, int64_t stride, int64_t row_elems, int64_t j) {
    return RowPrefetch{reinterpret_cast<const char*>(base + j * stride), stride * elem, row_elems * elem,
                       std::min(N, s1 - j)};
  };

  for (int64_t j0 = s0; j0 < s1; j0 += N) {
    const int64_t nS = std::min(N, s1 - j0);
    RowPrefetch pf_k, pf_v;
    if (j0 + ahead < s1) {
      pf_k = prefetch_at(k, p.k_stride_s, E, j0 + ahead);
      pf_v = prefetch_at(v, p.v_stride_s, Ev, j0 + ahead);
    }
    if (in_place) {
      ProcessBlock(d, R, e_pad, e_chunks, k + j0 * p.k_stride_s, p.k_stride_s, v + j0 * p.v_stride_s, p.v_stride_s,
                   ev_chunks, ev_pad, nS, pf_k, pf_v, s, m);
    } else {
      for (int64_t j = 0; j < nS; ++j) {
        pf_k.Row(j);
        pf_v.Row(j);
        WidenRow<T>(k + (j0 + j) * p.k_stride_s, E, e_pad, C(1), s.kp.data() + j * e_pad);
        WidenRow<T>(v + (j0 + j) * p.v_stride_s, Ev, ev_pad, C(1), s.vp.data() + j * ev_pad);
      }
      ProcessBlock(d, R, e_pad, e_chunks, static_cast<const C*>(s.kp.data()), e_pad,
                   static_cast<const C*>(s.vp.data()), ev_pad, ev_chunks, ev_pad, nS, RowPrefetch{}, RowPrefetch{},
                   s, m);
    }
  }
  for (int64_t t = 0; t < R; ++t) {
    C* acc = s.acc.data() + t * ev_pad;
    const C l = hn::GetLane(hn::SumOfLanes(d, hn::LoadU(d, s.lsum.data() + t * N)));
    if (res.out != nullptr) {
      // l == 0: no key had a finite score: zeros, as for a fully masked row (set, not
      // scaled: acc holds 0 * v, NaN where v is inf or NaN). A NaN or +inf score left l
      // NaN: the row is NaN, as softmax gives.
      const auto inv = hn::Set(d, l == C(0) ? C(0) : C(1) / l);
      for (int64_t c = 0; c < ev_pad; c += N) {
        hn::StoreU(l == C(0) ? hn::Zero(d) : hn::Mul(hn::LoadU(d, acc + c), inv), d, acc + c);
      }
      NarrowRow<T>(acc, Ev, res.out + (row0 + t) * Ev);
    } else {
      std::copy(acc, acc + Ev, res.part_acc + t * res.part_stride * Ev);
      res.part_m[t * res.part_stride] = m[t];
      res.part_l[t * res.part_stride] = l;
    }
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
  const int64_t want = ceil_div(2 * pool.num_threads(), groups);
  const int64_t slices = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, p.S / kMinSlice));
  const int64_t slice_len = ceil_div(p.S, slices);

  // With one slice the items write the output; otherwise part[(row * slices + slice)]
  // holds each slice's acc (Ev), max and sum for the merge.
  T* out = static_cast<T*>(p.out);
  std::vector<C> part_acc, part_m, part_l;
  if (slices > 1) {
    part_acc.resize(static_cast<size_t>(p.rows * slices * p.Ev));
    part_m.resize(static_cast<size_t>(p.rows * slices));
    part_l.resize(part_m.size());
  }
  const int64_t e_pad = PadToLanes<C>(p.E), ev_pad = PadToLanes<C>(p.Ev);
  const size_t lanes = hn::Lanes(hn::ScalableTag<C>());
  pool.parallel_for(groups * slices, 1, [&](int64_t begin, int64_t end) {
    DecodeScratch<T> s;
    s.qs.resize(static_cast<size_t>(kMaxGroup * e_pad));
    if (p.E != e_pad || p.Ev != ev_pad) {
      s.kp.resize(lanes * static_cast<size_t>(e_pad));
      s.vp.resize(lanes * static_cast<size_t>(ev_pad));
    }
    s.p.resize(static_cast<size_t>(kMaxGroup) * lanes);
    s.lsum.resize(static_cast<size_t>(kMaxGroup) * lanes);
    s.alpha.resize(static_cast<size_t>(kMaxGroup));
    s.acc.resize(static_cast<size_t>(kMaxGroup * ev_pad));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t g = item / slices, sl = item % slices;
      const int64_t row0 = group_start[g], R = group_start[g + 1] - row0;
      const int64_t s0 = sl * slice_len, s1 = std::min(p.S, s0 + slice_len);
      if (slices == 1) {
        DecodeSlice<T>(p, row0, R, s0, s1, s, SliceResult<T>{out});
        continue;
      }
      const size_t at = static_cast<size_t>(row0 * slices + sl);
      if (s0 >= s1) {
        for (int64_t t = 0; t < R; ++t) {
          part_m[at + t * slices] = -std::numeric_limits<C>::infinity();
          part_l[at + t * slices] = C(0);
          std::fill_n(part_acc.begin() + (at + t * slices) * p.Ev, p.Ev, C(0));
        }
        continue;
      }
      const SliceResult<T> res{nullptr, part_acc.data() + at * p.Ev, part_m.data() + at, part_l.data() + at, slices};
      DecodeSlice<T>(p, row0, R, s0, s1, s, res);
    }
  });
  if (slices == 1) return;

  // Merge the slices of each row in double, then round once.
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
      // total == 0: no key had a finite score: zeros, as for a fully masked row. A slice
      // with a NaN sum (a NaN or +inf score) makes total NaN, and the row NaN.
      const double inv_total = total == 0 ? 0.0 : 1.0 / total;
      for (int64_t c = 0; c < p.Ev; ++c) {
        double a = 0;
        for (int64_t sl = 0; sl < slices; ++sl) a += w[sl] * part_acc[(r * slices + sl) * p.Ev + c];
        row[c] = total == 0 ? C(0) : static_cast<C>(a * inv_total);
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
