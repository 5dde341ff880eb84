// The many-token (prefill) form of the fused MoE expert kernel, compiled once per Highway
// target by moe_experts_tiled_<weights>.cpp (internal; chosen per call in moe_kernels.cpp).
//
// The decode kernel (moe_experts-inl.h) runs each (token, expert) slot as its own GEMV:
// every weight is decoded again for every token routed to its expert, and each decoded
// vector feeds one FMA. With tens of tokens per expert that decode work, not memory, is
// the bound. Here the same passes run as register tiles of a GEMM: a tile is R weight rows
// by M tokens of one expert, each step decodes the R rows once (the GEMV decoders of
// gemv-inl.h, so bf16, f16, f32 and FP8 with row or 128x128 block scales read exactly as
// on the decode path) and feeds each decoded vector to M FMAs, with R * M accumulators.
// No float32 copy of the weights is made: the decoders' shifts and lookups cost less than
// writing and re-reading a widened panel (what an sgemm would need). FP8 is the
// exception in part: an expert with more than one tile of tokens decodes each 4-row
// group once into bf16 patterns in L1 (PackedBf16Of), which its tiles unpack for less
// than the FP8 decode.
//
// The phases and their order of operations are the decode kernel's, so the result does
// not depend on the number of threads either:
//   1. tokens to float32 in the decoder's lane order (MoeKernel::PrepareTokens);
//   2. gate/up: (expert, 4-row group) pieces; within a piece the expert's tokens go
//      through in tiles of M, and the 4 gate and 4 up rows stay in L1 while they do;
//      then SwiGLU per slot (MoeKernel::FinishSlot);
//   3. down: items of kDownRows output rows; an item runs every active expert in
//      ascending order (the shared expert last), each expert's down rows in groups of R
//      against its tokens' activations in tiles of M (those activations stay in L2 while
//      the item sweeps its rows), and adds the routing-weighted sums into its own
//      [tokens, kDownRows] float32 accumulator, then writes those output columns once.

// Per-target include guard (Highway's pattern: the toggle flips once per target).
#if defined(KILN_BACKEND_CPU_MOE_EXPERTS_TILED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_MOE_EXPERTS_TILED_INL_H_
#undef KILN_BACKEND_CPU_MOE_EXPERTS_TILED_INL_H_
#else
#define KILN_BACKEND_CPU_MOE_EXPERTS_TILED_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/moe/moe_experts-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {

// Output rows per down item: the item's accumulator is [tokens, kDownRows] floats, and
// hidden 2048 still gives 32 items to share between threads.
constexpr int64_t kDownRows = 64;

// sums[r * M + m] = sum_k x_m[k] * decoded W[r, k] for R rows from w (row stride ldw) and
// M prepared token vectors xs[m] of length K (padded to whole steps with zeros), undecoded
// (the caller undoes the decode factor and row scales). kBlocked: each 128-wide block's
// partial sums are multiplied by block_scale[block]. The body and the tail are one
// accumulation, as in DotRows.
template <class Dec, int R, int M, bool kBlocked>
HWY_INLINE void DotRowsTokens(const typename Dec::T* HWY_RESTRICT w, int64_t ldw, const float* const* xs, int64_t K,
                              const float* HWY_RESTRICT block_scale, float* HWY_RESTRICT sums) {
  constexpr int V = Dec::kVecs;
  const DF df;
  const Dec dec;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t step = StepOf<Dec>(df);
  const int64_t block = kBlocked ? kFp8ScaleBlock : K;
  VF total[R][M];
  for (int r = 0; r < R; ++r) {
    for (int m = 0; m < M; ++m) total[r][m] = hn::Zero(df);
  }
  for (int64_t kb = 0; kb < K; kb += block) {
    const int64_t kend = std::min(K, kb + block);
    VF acc[R][M];
    for (int r = 0; r < R; ++r) {
      for (int m = 0; m < M; ++m) acc[r][m] = hn::Zero(df);
    }
    const auto accumulate = [&](int64_t k, auto load) HWY_ATTR {
      VF wv[R][V];
      for (int r = 0; r < R; ++r) load(w + r * ldw + k, wv[r]);
      for (int m = 0; m < M; ++m) {
        for (int v = 0; v < V; ++v) {
          const VF x = hn::LoadU(df, xs[m] + k + v * lanes);
          for (int r = 0; r < R; ++r) acc[r][m] = hn::MulAdd(wv[r][v], x, acc[r][m]);
        }
      }
    };
    int64_t k = kb;
    for (; k + step <= kend; k += step) {
      accumulate(k, [&](const typename Dec::T* p, VF* wv) HWY_ATTR { dec.Load(p, wv); });
    }
    if (k < kend) {
      const size_t rest = static_cast<size_t>(kend - k);
      accumulate(k, [&](const typename Dec::T* p, VF* wv) HWY_ATTR { LoadTail(dec, p, rest, wv); });
    }
    for (int r = 0; r < R; ++r) {
      for (int m = 0; m < M; ++m) {
        if constexpr (kBlocked) {
          total[r][m] = hn::MulAdd(acc[r][m], hn::Set(df, block_scale[kb / kFp8ScaleBlock]), total[r][m]);
        } else {
          total[r][m] = acc[r][m];
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int m = 0; m < M; ++m) sums[r * M + m] = hn::GetLane(hn::SumOfLanes(df, total[r][m]));
  }
}

// Whether Dec's Load is LoadBf16Words followed by a bf16 split of each word vector.
template <class Dec>
constexpr bool PacksBf16Words() {
  if constexpr (requires { Dec::kPacksBf16; }) {
    return Dec::kPacksBf16;
  } else {
    return false;
  }
}

// FP8 rows re-stored once as bf16 patterns, for tiles that read them again and again.
// Every FP8 decoder yields floats that are bf16 values (e4m3 times 2^-8 has at most 4
// significant bits and a bf16 exponent), so a decoded vector pair (w0, w1) packs exactly
// into one vector of 32-bit lanes (w1's high half, w0's high half) and unpacks with a
// shift and a mask: 3 instructions per 2 vectors against ~8 for the AVX-512 FP8 decode
// and 14 per 4 for the VBMI table decode, whose register cost also holds its tiles to 2
// rows (each x vector loaded for 2 FMAs; packed tiles take 4 rows). The packed rows are read 2 vectors a step
// whatever Dec's step: vectors 2i and 2i+1 of a Dec step are its slots [2iL, 2iL + 2L),
// so they meet the same x (prepared in Dec's order) and feed each accumulator in the
// same sequence. Sums are therefore bit-identical to decoding every tile.
template <class Dec>
struct PackedBf16Of {
  static_assert(Dec::kVecs % 2 == 0, "vectors pack in pairs");
  using T = uint16_t;  // one per weight, in Dec's slot order
  static constexpr int kVecs = 2;
  static constexpr bool kPermutesX = Dec::kPermutesX;
  static constexpr float kDecodedPerReal = Dec::kDecodedPerReal;
  // A pair of 16-bit patterns is read and written as one 32-bit lane (Highway's loads
  // and stores copy bytes, so the uint32_t view does not alias the buffer's elements).
  HWY_INLINE void Load(const T* HWY_RESTRICT p, VF* w) const {
    const DF df;
    const hn::RebindToUnsigned<DF> du32;
    const auto pairs = hn::LoadU(du32, reinterpret_cast<const uint32_t*>(p));
    w[0] = hn::BitCast(df, hn::ShiftLeft<16>(pairs));
    w[1] = hn::BitCast(df, hn::And(pairs, hn::Set(du32, 0xFFFF0000u)));
  }
  // Packs `rows` rows of K weights (row stride ldw) into out (row stride ld = K rounded
  // up to whole steps; the tail step decodes through zeros as the tiles' tail does).
  // Decoders whose Load splits bf16 words (kPacksBf16: the AVX-512 ones) hand over the
  // words, which are the packed pairs already: 5 instructions per 64 weights for the
  // VBMI table decode instead of its 14 plus 3 per vector pair to re-pack them.
  static void Pack(const typename Dec::T* HWY_RESTRICT w, int64_t ldw, int rows, int64_t K, int64_t ld,
                   T* HWY_RESTRICT out) {
    if constexpr (PacksBf16Words<Dec>()) {
      PackWords(w, ldw, rows, K, ld, out);
    } else {
      PackDecoded(w, ldw, rows, K, ld, out);
    }
  }

 private:
  static void PackWords(const typename Dec::T* HWY_RESTRICT w, int64_t ldw, int rows, int64_t K, int64_t ld,
                        T* HWY_RESTRICT out) {
    constexpr int kWordVecs = Dec::kVecs / 2;
    const fp8::DU16 du16;
    const Dec dec;
    const int64_t word_lanes = static_cast<int64_t>(hn::Lanes(du16));
    const int64_t step = StepOf<Dec>(DF());
    fp8::VU16 words[kWordVecs];
    for (int r = 0; r < rows; ++r) {
      const typename Dec::T* row = w + r * ldw;
      T* dst = out + r * ld;
      for (int64_t k = 0; k < K; k += step) {
        if (k + step <= K) {
          dec.LoadBf16Words(row + k, words);
        } else {
          HWY_ALIGN typename Dec::T buf[kMaxStep] = {};
          std::memcpy(buf, row + k, static_cast<size_t>(K - k) * sizeof(typename Dec::T));
          dec.LoadBf16Words(buf, words);
        }
        for (int i = 0; i < kWordVecs; ++i) hn::StoreU(words[i], du16, dst + k + i * word_lanes);
      }
    }
  }

  static void PackDecoded(const typename Dec::T* HWY_RESTRICT w, int64_t ldw, int rows, int64_t K, int64_t ld,
                          T* HWY_RESTRICT out) {
    const DF df;
    const hn::RebindToUnsigned<DF> du32;
    const Dec dec;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    const int64_t step = StepOf<Dec>(df);
    for (int r = 0; r < rows; ++r) {
      const typename Dec::T* row = w + r * ldw;
      T* dst = out + r * ld;
      for (int64_t k = 0; k < K; k += step) {
        VF wv[Dec::kVecs];
        if (k + step <= K) {
          dec.Load(row + k, wv);
        } else {
          LoadTail(dec, row + k, static_cast<size_t>(K - k), wv);
        }
        for (int v = 0; v < Dec::kVecs; v += 2) {
          const auto high = hn::And(hn::BitCast(du32, wv[v + 1]), hn::Set(du32, 0xFFFF0000u));
          const auto pairs = hn::Or(high, hn::ShiftRight<16>(hn::BitCast(du32, wv[v])));
          hn::StoreU(pairs, du32, reinterpret_cast<uint32_t*>(dst + k + v * lanes));
        }
      }
    }
  }
};

template <class Dec, bool kScaled, bool kBlocked>
struct MoeTiledKernel {
  using T = typename Dec::T;
  using Base = MoeKernel<Dec, kScaled, kBlocked>;
  // A tile holds R * M accumulators and the R * V decoded weight vectors of one step in
  // registers (16 + 8 of AVX-512's 32, leaving room for x): 4 rows by 4 tokens for the
  // two-vector decoders (bf16, f16, f32, the AVX2/AVX3 FP8 decodes; 8 decode
  // instructions of bf16 per 32 FMAs), 2 rows by 4 tokens for the four-vector FP8 table
  // decode. FP8 experts with more than one tile of tokens pack each row group once
  // (PackedBf16Of) and run 4 x 4 tiles on it. (Before the packing, the table decode ran
  // 2 x 8 tiles to spread its ~14 instructions per 64 weights over more tokens; the
  // packed 4 x 4 tiles were 1.1-1.6x faster at 8-32 tokens per expert, docs/bench.md.)
  static constexpr bool kPacks = std::is_same_v<T, uint8_t>;
  static constexpr int R = Dec::kVecs <= 2 ? 4 : 2;
  static constexpr int M = 4;
  static constexpr int kPackedRows = 4;
  static_assert(kRowsPerPass % R == 0, "a 4-row group is a whole number of tiles");
  static constexpr float kUndoDecode = 1.0f / Dec::kDecodedPerReal;  // a power of two: exact

  const Base& base;

  const MoeExpertsArgs& args() const { return base.a; }
  const MoePlan& plan() const { return base.plan; }

  using Packed = PackedBf16Of<Dec>;

  // sums[r * m_count + m] = real dot products of rows [n, n + rows) of matrix `m` (cols
  // wide) with the m_count (<= M) prepared vectors xs. With `packed` (not null) the rows
  // are read from there instead: rows [n, n + rows) packed by Pack with row stride
  // `packed_ld`.
  void Dot(const ExpertMatrix& mat, int64_t cols, int64_t n, int rows, const float* const* xs, int m_count,
           float* sums, const uint16_t* packed = nullptr, int64_t packed_ld = 0) const {
    const float* block_scale = nullptr;
    if constexpr (kBlocked) block_scale = mat.scale + n / kFp8ScaleBlock * ceil_div(cols, kFp8ScaleBlock);
    if constexpr (kPacks) {
      if (packed != nullptr) {
        // The packed rows are whole steps, zero past cols, like the tail decode.
        DotRows<Packed, kPackedRows>(packed, packed_ld, packed_ld, block_scale, rows, xs, m_count, sums);
        return Unscale(mat, n, rows, m_count, sums);
      }
    }
    DotRows<Dec, R>(static_cast<const T*>(mat.data) + n * mat.row_stride, mat.row_stride, cols, block_scale, rows, xs,
                 m_count, sums);
    Unscale(mat, n, rows, m_count, sums);
  }

  template <class D, int kR>
  static void DotRows(const typename D::T* at, int64_t ldw, int64_t K, const float* block_scale, int rows,
                      const float* const* xs, int m_count, float* sums) {
    for (int r0 = 0; r0 < rows; r0 += kR) {
      float* out = sums + r0 * m_count;
      if (rows - r0 >= kR) {
        DotTiles<D, kR>(at + r0 * ldw, ldw, xs, K, block_scale, m_count, out);
      } else {
        for (int r = r0; r < rows; ++r) DotTiles<D, 1>(at + r * ldw, 0, xs, K, block_scale, m_count, sums + r * m_count);
        break;
      }
    }
  }

  static void Unscale(const ExpertMatrix& mat, int64_t n, int rows, int m_count, float* sums) {
    for (int r = 0; r < rows; ++r) {
      float scale = kUndoDecode;
      if constexpr (kScaled && !kBlocked) scale *= mat.scale[n + r];
      for (int m = 0; m < m_count; ++m) sums[r * m_count + m] *= scale;
    }
  }

  // The tile kernel for m_count (1..kM) tokens.
  template <class D, int kRows, int kM = M>
  static void DotTiles(const typename D::T* w, int64_t ldw, const float* const* xs, int64_t K,
                       const float* block_scale, int m_count, float* out) {
    if constexpr (kM > 1) {
      if (m_count < kM) return DotTiles<D, kRows, kM - 1>(w, ldw, xs, K, block_scale, m_count, out);
    }
    DotRowsTokens<D, kRows, kM, kBlocked>(w, ldw, xs, K, block_scale, out);
  }

  // Packs rows [n, n + rows) of `mat` (cols wide) into buf when the expert's slot_count
  // tokens take more than one tile; returns the packed rows (null when not packed).
  const uint16_t* MaybePack(const ExpertMatrix& mat, int64_t cols, int64_t n, int rows, int64_t slot_count,
                            std::vector<uint16_t>& buf, int64_t& ld) const {
    if constexpr (kPacks) {
      if (slot_count > M) {
        ld = ceil_div(cols, base.step) * base.step;
        buf.resize(static_cast<size_t>(rows * ld));
        Packed::Pack(static_cast<const T*>(mat.data) + n * mat.row_stride, mat.row_stride, rows, cols, ld,
                     buf.data());
        return buf.data();
      }
    }
    return nullptr;
  }

  // Gate and up rows [4 g, 4 g + 4) of expert e for every slot routed to it, M slots a tile.
  void GateUpGroup(int64_t e, int64_t g, std::vector<uint16_t>& gate_buf, std::vector<uint16_t>& up_buf) const {
    const SwigluExpert& ex = base.expert(e);
    const int64_t n = g * kRowsPerPass;
    const int rows = static_cast<int>(std::min<int64_t>(kRowsPerPass, ex.inter - n));
    const int64_t H = args().hidden;
    const int64_t slot_count = plan().slot_begin[e + 1] - plan().slot_begin[e];
    int64_t ld = 0;
    const uint16_t* gate_rows = MaybePack(ex.gate, H, n, rows, slot_count, gate_buf, ld);
    const uint16_t* up_rows = MaybePack(ex.up, H, n, rows, slot_count, up_buf, ld);
    for (int64_t i = plan().slot_begin[e]; i < plan().slot_begin[e + 1]; i += M) {
      const int count = static_cast<int>(std::min<int64_t>(M, plan().slot_begin[e + 1] - i));
      const float* xs[M];
      for (int m = 0; m < count; ++m) xs[m] = base.xs + plan().token_of(plan().slot_list[i + m]) * base.x_stride;
      float g_sums[kRowsPerPass * M], u_sums[kRowsPerPass * M];
      Dot(ex.gate, H, n, rows, xs, count, g_sums, gate_rows, ld);
      Dot(ex.up, H, n, rows, xs, count, u_sums, up_rows, ld);
      for (int m = 0; m < count; ++m) {
        const int64_t at = plan().slot_list[i + m] * base.act_stride + n;
        for (int r = 0; r < rows; ++r) {
          base.gate[at + r] = g_sums[r * count + m];
          base.act[at + r] = u_sums[r * count + m];
        }
      }
    }
  }

  // Output rows [h0, h0 + kDownRows) of every token, into acc [tokens, kDownRows].
  void DownRows(int64_t h0, float* acc, std::vector<uint16_t>& down_buf) const {
    const MoeExpertsArgs& a = args();
    const int64_t rows_here = std::min(kDownRows, a.hidden - h0);
    std::fill(acc, acc + a.tokens * kDownRows, 0.0f);
    for (int64_t e : plan().active) {
      const SwigluExpert& ex = base.expert(e);
      for (int64_t n = h0; n < h0 + rows_here; n += kRowsPerPass) {
        const int rows = static_cast<int>(std::min<int64_t>(kRowsPerPass, h0 + rows_here - n));
        int64_t ld = 0;
        const uint16_t* down_rows = MaybePack(ex.down, ex.inter, n, rows,
                                              plan().slot_begin[e + 1] - plan().slot_begin[e], down_buf, ld);
        for (int64_t i = plan().slot_begin[e]; i < plan().slot_begin[e + 1]; i += M) {
          const int count = static_cast<int>(std::min<int64_t>(M, plan().slot_begin[e + 1] - i));
          const float* xs[M];
          for (int m = 0; m < count; ++m) xs[m] = base.act + plan().slot_list[i + m] * base.act_stride;
          float sums[kRowsPerPass * M];
          Dot(ex.down, ex.inter, n, rows, xs, count, sums, down_rows, ld);
          for (int m = 0; m < count; ++m) {
            const int64_t slot = plan().slot_list[i + m];
            const float weight = plan().weight_of(slot, a);
            float* out = acc + plan().token_of(slot) * kDownRows + (n - h0);
            for (int r = 0; r < rows; ++r) out[r] += weight * sums[r * count + m];
          }
        }
      }
    }
    const size_t item = itemsize(a.act_dtype);
    for (int64_t t = 0; t < a.tokens; ++t) {
      from_f32(acc + t * kDownRows, a.act_dtype, static_cast<char*>(a.out) + (t * a.hidden + h0) * item, rows_here);
    }
  }

  void Run(ThreadPool& pool) const {
    const MoeExpertsArgs& a = args();
    pool.parallel_for(a.tokens, std::max<int64_t>(1, 65536 / a.hidden), [&](int64_t t0, int64_t t1) {
      base.PrepareTokens(t0, t1);
    });
    // Pieces cost in proportion to the tokens of their expert: one piece a task, taken in
    // expert order from the pool's split (grain 1), keeps the two halves even enough at
    // prefill sizes, where every piece is many microseconds.
    const int64_t pieces = plan().group_begin.back();
    pool.parallel_for(pieces, 1, [&](int64_t p0, int64_t p1) {
      std::vector<uint16_t> gate_buf, up_buf;
      size_t k = std::upper_bound(plan().group_begin.begin(), plan().group_begin.end(), p0) -
                 plan().group_begin.begin() - 1;
      for (int64_t p = p0; p < p1; ++p) {
        while (p >= plan().group_begin[k + 1]) ++k;
        GateUpGroup(plan().active[k], p - plan().group_begin[k], gate_buf, up_buf);
      }
    });
    pool.parallel_for(plan().slots, std::max<int64_t>(1, 16384 / base.act_stride), [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) base.FinishSlot(s);
    });
    pool.parallel_for(ceil_div(a.hidden, kDownRows), 1, [&](int64_t i0, int64_t i1) {
      std::vector<float> acc(static_cast<size_t>(a.tokens * kDownRows));
      std::vector<uint16_t> down_buf;
      for (int64_t i = i0; i < i1; ++i) DownRows(i * kDownRows, acc.data(), down_buf);
    });
  }
};

template <class Dec, bool kScaled, bool kBlocked>
void RunMoeExpertsTiled(ThreadPool& pool, const MoeExpertsArgs& a, const MoePlan& plan) {
  const DF df;
  const int64_t step = StepOf<Dec>(df);
  const auto round_up = [&](int64_t n) { return ceil_div(n, step) * step; };
  const int64_t x_stride = round_up(a.hidden);
  const int64_t act_stride = round_up(std::max<int64_t>(plan.max_inter, 1));
  MoeScratch scratch(a.tokens * x_stride + 2 * plan.slots * act_stride);
  float* xs = scratch.data();
  float* gate = xs + a.tokens * x_stride;
  float* act = gate + plan.slots * act_stride;
  const MoeKernel<Dec, kScaled, kBlocked> base{a, plan, step, x_stride, act_stride, xs, gate, act};
  MoeTiledKernel<Dec, kScaled, kBlocked>{base}.Run(pool);
}

}  // namespace
}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
