// The many-token MoE expert kernel for bfloat16 and float8_e4m3fn experts on a CPU with
// AVX512-BF16: the phases of the tiled kernel (moe_experts_tiled-inl.h), with the
// vdpbf16ps tiles of backend/cpu/linear/bf16_dot_gemm.h instead of decode-and-FMA tiles.
// Chosen per call in moe_kernels.cpp when the tiled kernel would run and
// kiln::bf16_dot_enabled().
//
//   1. tokens rounded to bf16 once, then packed per expert into blocks of 16 of its
//      slots (bf16_dot_gemm.h's pair layout);
//   2. gate/up: (expert, 12-row group) pieces; each runs its 12 gate and 12 up rows over
//      the expert's blocks, two at a time (12 x 32 tiles; a last block of at most 8 slots
//      in half-width registers), bf16 weights read in place;
//   3. SwiGLU per slot in float32, the result rounded to bf16 and packed per expert;
//   4. down: items of kDownRows output rows; an item runs every active expert in
//      ascending order (the shared expert last) and adds the routing-weighted sums into
//      its own [tokens, kDownRows] float32 accumulator, then writes those columns once.
// FP8 experts: a piece decodes its 12 gate and 12 up rows, an item each expert's
// kDownRows down rows, exactly to bf16 into the task's scratch (bf16dot::decode_fp8_rows)
// and runs the same tiles on them, the row or 128x128 block scales applied to the sums
// (bf16dot::dot_rows_fp8); every weight is decoded once per call, as the expert's tokens
// all go through the tile that holds it. The decode reads its codes from memory, so the
// tiles before it prefetch them (bf16dot::CodeStream): the next expert's rows of a down
// item, and the next piece of a task's claimed chunk of gate/up pieces (one-thread CPU
// time of 32 experts at 16 / 32 tokens each: 45-54 / 70-74 ms -> 38-42 / 60-63 ms).
//
// Balance: the pieces cost in proportion to their expert's tokens and the items are 43
// of nearly equal cost (hidden 2048); splitting either in halves by count left one
// thread with more of the work whenever the routing was uneven (or another process took
// a core). Each thread instead claims the next 4 pieces or the next item from a shared
// counter, in order, until none is left, so the phases end within a few pieces of each
// other.
//
// Each output element is summed by one tile in a fixed order, so results do not depend
// on the number of threads or on which thread claimed what. Against the float32 kernels,
// x and the SwiGLU activations are rounded to bf16 (relative error up to 2^-8 each) before the
// products.
#include <algorithm>
#include <atomic>
#include <vector>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/elementwise/activation_fused_kernels.h"
#include "backend/cpu/linear/bf16_dot_gemm.h"
#include "backend/cpu/moe/moe_plan.h"
#include "kiln/int_math.h"

namespace kiln::cpu {

namespace {

using bf16dot::block_words;
using bf16dot::kBlockTokens;
using bf16dot::kTileRows;

// Output rows per down item: 4 full tiles; hidden 2048 gives 43 items to share.
constexpr int64_t kDownRows = 4 * kTileRows;
static_assert(kDownRows <= bf16dot::kMaxScaledRows, "a down item's rows go to dot_rows_fp8 in one call");
// Floats of one tile's sums: up to kDownRows rows by two blocks.
constexpr int64_t kSumsLd = 2 * kBlockTokens;

int64_t words_as_floats(int64_t words) { return words; }  // uint32 and float are both 4 bytes
int64_t halves_as_floats(int64_t halves) { return ceil_div(halves, 2); }

// Runs body(item, following, scratch) for every item in [0, n): one task per thread, each
// claiming the next `chunk` items from a shared counter (relaxed: the items are
// independent and the pool joins the tasks) until none is left; `following` is the item
// the same task runs next (item + 1 inside a chunk, else -1), whose weights the body may
// prefetch. make_scratch() builds the task's work space.
template <class MakeScratch, class Body>
void claim_items(ThreadPool& pool, int64_t n, int64_t chunk, const MakeScratch& make_scratch, const Body& body) {
  std::atomic<int64_t> next{0};
  pool.parallel_for(std::min<int64_t>(pool.num_threads(), ceil_div(n, chunk)), 1, [&](int64_t, int64_t) {
    auto scratch = make_scratch();
    for (int64_t i0 = next.fetch_add(chunk, std::memory_order_relaxed); i0 < n;
         i0 = next.fetch_add(chunk, std::memory_order_relaxed)) {
      const int64_t i1 = std::min(n, i0 + chunk);
      for (int64_t i = i0; i < i1; ++i) body(i, i + 1 < i1 ? i + 1 : -1, scratch);
    }
  });
}

// Gate/up pieces a task claims at a time: the first three know the piece they run next
// and prefetch its FP8 rows while their tiles run.
constexpr int64_t kPieceChunk = 4;

// A task's work space: FP8 rows decoded to bf16, and a down item's accumulator.
struct TaskScratch {
  std::vector<uint16_t> decoded;
  std::vector<float> acc;
};

class Bf16DotMoe {
 public:
  Bf16DotMoe(const MoeExpertsArgs& a, const MoePlan& plan)
      : a_(a), plan_(plan), fp8_(a.weight_dtype == DType::Float8_e4m3fn) {
    block_begin_.assign(1, 0);
    piece_begin_.assign(1, 0);
    for (int64_t e : plan.active) {
      block_begin_.push_back(block_begin_.back() + ceil_div(slot_count(e), kBlockTokens));
      piece_begin_.push_back(piece_begin_.back() + ceil_div(expert(e).inter, kTileRows));
    }
    bw_h_ = block_words(a.hidden);
    bw_i_ = block_words(std::max<int64_t>(plan.max_inter, 1));
    act_stride_ = std::max<int64_t>(plan.max_inter, 1);
  }

  void Run(ThreadPool& pool) {
    const int64_t H = a_.hidden;
    const int64_t blocks = block_begin_.back();
    const bool bf16_x = a_.act_dtype == DType::BFloat16;
    MoeScratch x_narrow(bf16_x ? 1 : halves_as_floats(checked_mul(a_.tokens, H, "moe_experts")));
    MoeScratch x_packed(words_as_floats(checked_mul(blocks, bw_h_, "moe_experts")));
    MoeScratch gate(checked_mul(plan_.slots, act_stride_, "moe_experts"));
    MoeScratch act(checked_mul(plan_.slots, act_stride_, "moe_experts"));
    MoeScratch act_narrow(halves_as_floats(plan_.slots * act_stride_));
    MoeScratch act_packed(words_as_floats(checked_mul(blocks, bw_i_, "moe_experts")));
    const uint16_t* xb = bf16_x ? static_cast<const uint16_t*>(a_.x) : reinterpret_cast<uint16_t*>(x_narrow.data());
    uint32_t* xp = reinterpret_cast<uint32_t*>(x_packed.data());
    uint16_t* ab = reinterpret_cast<uint16_t*>(act_narrow.data());
    uint32_t* ap = reinterpret_cast<uint32_t*>(act_packed.data());
    gate_ = gate.data();
    act_ = act.data();

    // 1. Tokens to bf16 (unless they are), then into each expert's blocks.
    if (!bf16_x) {
      const size_t isz = itemsize(a_.act_dtype);
      uint16_t* out = reinterpret_cast<uint16_t*>(x_narrow.data());
      pool.parallel_for(a_.tokens, std::max<int64_t>(1, 65536 / H), [&](int64_t t0, int64_t t1) {
        std::vector<float> wide(static_cast<size_t>(H));
        for (int64_t t = t0; t < t1; ++t) {
          bf16dot::round_to_bf16(a_.act_dtype, static_cast<const char*>(a_.x) + t * H * isz, H, out + t * H,
                                 wide.data());
        }
      });
    }
    PackBlocks(pool, H, bw_h_, xp, [&](int64_t slot, int64_t) { return xb + plan_.token_of(slot) * H; });

    // 2. Gate and up.
    claim_items(
        pool, piece_begin_.back(), kPieceChunk, [&] { return MakeScratch(2 * kTileRows * H); },
        [&](int64_t p, int64_t following, TaskScratch& scratch) {
          const size_t k = ActiveOf(piece_begin_, p);
          const ExpertMatrix* next_gate = nullptr;
          const ExpertMatrix* next_up = nullptr;
          int64_t next_row = 0;
          if (fp8_ && following >= 0) {
            const size_t kn = ActiveOf(piece_begin_, following);
            next_gate = &expert(plan_.active[kn]).gate;
            next_up = &expert(plan_.active[kn]).up;
            next_row = (following - piece_begin_[kn]) * kTileRows;
          }
          GateUpPiece(k, p - piece_begin_[k], xp, scratch, Stream(next_gate, next_row), Stream(next_up, next_row));
        });

    // 3. SwiGLU, rounded to bf16, packed per expert.
    pool.parallel_for(plan_.slots, std::max<int64_t>(1, 16384 / act_stride_), [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) {
        const int64_t inter = expert(plan_.expert_of_slot[s]).inter;
        float* row = act_ + s * act_stride_;
        mul_silu(row, gate_ + s * act_stride_, row, inter);
        from_f32(row, DType::BFloat16, ab + s * act_stride_, inter);
      }
    });
    PackBlocks(pool, -1, bw_i_, ap, [&](int64_t slot, int64_t) { return ab + slot * act_stride_; });

    // 4. Down.
    claim_items(
        pool, ceil_div(H, kDownRows), 1,
        [&] {
          TaskScratch scratch = MakeScratch(kDownRows * plan_.max_inter);
          scratch.acc.resize(static_cast<size_t>(a_.tokens * kDownRows));
          return scratch;
        },
        [&](int64_t i, int64_t, TaskScratch& scratch) { DownItem(i * kDownRows, ap, scratch); });
  }

 private:
  const SwigluExpert& expert(int64_t e) const { return e < a_.num_experts ? a_.experts[e] : *a_.shared; }
  int64_t slot_count(int64_t e) const { return plan_.slot_begin[e + 1] - plan_.slot_begin[e]; }

  // The active index whose range in `begin` holds item p.
  static size_t ActiveOf(const std::vector<int64_t>& begin, int64_t p) {
    return static_cast<size_t>(std::upper_bound(begin.begin(), begin.end(), p) - begin.begin() - 1);
  }

  // Packs every expert's slots into its blocks: row_of(slot) is the slot's bf16 row, of
  // `cols` elements (cols < 0: the expert's inter).
  template <class RowOf>
  void PackBlocks(ThreadPool& pool, int64_t cols, int64_t bw, uint32_t* packed, const RowOf& row_of) const {
    const int64_t per_block = kBlockTokens * std::max<int64_t>(cols < 0 ? plan_.max_inter : cols, 1);
    pool.parallel_for(block_begin_.back(), std::max<int64_t>(1, 65536 / per_block), [&](int64_t b0, int64_t b1) {
      size_t k = ActiveOf(block_begin_, b0);
      for (int64_t b = b0; b < b1; ++b) {
        while (b >= block_begin_[k + 1]) ++k;
        const int64_t e = plan_.active[k];
        const int64_t first = plan_.slot_begin[e] + (b - block_begin_[k]) * kBlockTokens;
        const int count = static_cast<int>(std::min<int64_t>(kBlockTokens, plan_.slot_begin[e + 1] - first));
        const uint16_t* rows[kBlockTokens];
        for (int t = 0; t < count; ++t) rows[t] = row_of(plan_.slot_list[first + t], e);
        bf16dot::pack_block(rows, count, cols < 0 ? expert(e).inter : cols, packed + b * bw);
      }
    });
  }

  // Scratch for `decoded` bf16 weights (FP8 experts only).
  TaskScratch MakeScratch(int64_t decoded) const {
    TaskScratch s;
    if (fp8_) s.decoded.resize(static_cast<size_t>(decoded));
    return s;
  }

  // Rows [n, n + rows) of `mat` (cols wide) as bf16: in place for bf16 experts, else
  // decoded into `out`. Sets ld to the row stride of what it returns.
  const uint16_t* RowsOf(const ExpertMatrix& mat, int64_t n, int64_t rows, int64_t cols, uint16_t* out,
                         int64_t& ld) const {
    if (!fp8_) {
      ld = mat.row_stride;
      return static_cast<const uint16_t*>(mat.data) + n * mat.row_stride;
    }
    bf16dot::decode_fp8_rows(static_cast<const uint8_t*>(mat.data) + n * mat.row_stride, mat.row_stride, rows, cols,
                             out, cols);
    ld = cols;
    return out;
  }

  // The FP8 codes of rows [row, ...) of `mat` as a prefetch stream (none for null).
  static bf16dot::CodeStream Stream(const ExpertMatrix* mat, int64_t row) {
    if (mat == nullptr) return {};
    return {static_cast<const uint8_t*>(mat->data) + row * mat->row_stride, mat->row_stride};
  }

  // The real dot products of rows [n, n + rows) of `mat` (cols wide, read at w with row
  // stride ldw) with `tokens` packed slots; FP8 tiles prefetch `next`'s codes meanwhile.
  void Dot(const ExpertMatrix& mat, int64_t cols, const uint16_t* w, int64_t ldw, int64_t n, int64_t rows,
           const uint32_t* x, int64_t bw, int tokens, float* sums, const bf16dot::CodeStream& next) const {
    if (!fp8_) return bf16dot::dot_rows(w, ldw, rows, x, bw, tokens, cols, sums, kSumsLd);
    bf16dot::dot_rows_fp8(w, ldw, rows, x, bw, tokens, cols, {mat.scale, a_.scale_layout, cols}, n, sums, kSumsLd,
                          next);
  }

  // Gate and up rows [12 g, 12 g + 12) of active expert k for all its slots.
  // next_gate / next_up: the FP8 rows of the piece this task runs next (prefetched).
  void GateUpPiece(size_t k, int64_t g, const uint32_t* xp, TaskScratch& scratch, const bf16dot::CodeStream& next_gate,
                   const bf16dot::CodeStream& next_up) const {
    const int64_t e = plan_.active[k];
    const SwigluExpert& ex = expert(e);
    const int64_t n = g * kTileRows;
    const int64_t rows = std::min(kTileRows, ex.inter - n);
    const int64_t H = a_.hidden;
    int64_t ld_gate = 0, ld_up = 0;
    const uint16_t* gate_w = RowsOf(ex.gate, n, rows, H, scratch.decoded.data(), ld_gate);
    const uint16_t* up_w = RowsOf(ex.up, n, rows, H, fp8_ ? scratch.decoded.data() + kTileRows * H : nullptr, ld_up);
    const int64_t blocks = block_begin_[k + 1] - block_begin_[k];
    float g_sums[kTileRows * kSumsLd], u_sums[kTileRows * kSumsLd];
    for (int64_t j = 0; j < blocks; j += 2) {
      const int64_t first = plan_.slot_begin[e] + j * kBlockTokens;
      const int64_t count = std::min<int64_t>(2 * kBlockTokens, plan_.slot_begin[e + 1] - first);
      const uint32_t* x = xp + (block_begin_[k] + j) * bw_h_;
      Dot(ex.gate, H, gate_w, ld_gate, n, rows, x, bw_h_, static_cast<int>(count), g_sums, next_gate);
      Dot(ex.up, H, up_w, ld_up, n, rows, x, bw_h_, static_cast<int>(count), u_sums, next_up);
      for (int64_t i = 0; i < count; ++i) {
        const int64_t at = plan_.slot_list[first + i] * act_stride_ + n;
        for (int64_t r = 0; r < rows; ++r) {
          gate_[at + r] = g_sums[r * kSumsLd + i];
          act_[at + r] = u_sums[r * kSumsLd + i];
        }
      }
    }
  }

  // Output rows [h0, h0 + kDownRows) of every token.
  // The item's accumulator is scratch.acc ([tokens, kDownRows]).
  void DownItem(int64_t h0, const uint32_t* ap, TaskScratch& scratch) const {
    const int64_t rows = std::min(kDownRows, a_.hidden - h0);
    float* acc = scratch.acc.data();
    std::fill(acc, acc + a_.tokens * kDownRows, 0.0f);
    float sums[kDownRows * kSumsLd];
    for (size_t k = 0; k < plan_.active.size(); ++k) {
      const int64_t e = plan_.active[k];
      const SwigluExpert& ex = expert(e);
      int64_t ld = 0;
      const uint16_t* down_w = RowsOf(ex.down, h0, rows, ex.inter, scratch.decoded.data(), ld);
      // The next expert's rows of this item, decoded after these tiles.
      const bf16dot::CodeStream next_down =
          fp8_ && k + 1 < plan_.active.size() ? Stream(&expert(plan_.active[k + 1]).down, h0) : bf16dot::CodeStream{};
      const int64_t blocks = block_begin_[k + 1] - block_begin_[k];
      for (int64_t j = 0; j < blocks; j += 2) {
        const int64_t first = plan_.slot_begin[e] + j * kBlockTokens;
        const int64_t count = std::min<int64_t>(2 * kBlockTokens, plan_.slot_begin[e + 1] - first);
        Dot(ex.down, ex.inter, down_w, ld, h0, rows, ap + (block_begin_[k] + j) * bw_i_, bw_i_, static_cast<int>(count),
            sums, next_down);
        for (int64_t i = 0; i < count; ++i) {
          const int64_t slot = plan_.slot_list[first + i];
          const float weight = plan_.weight_of(slot, a_);
          float* out = acc + plan_.token_of(slot) * kDownRows;
          for (int64_t r = 0; r < rows; ++r) out[r] += weight * sums[r * kSumsLd + i];
        }
      }
    }
    const size_t isz = itemsize(a_.act_dtype);
    for (int64_t t = 0; t < a_.tokens; ++t) {
      from_f32(acc + t * kDownRows, a_.act_dtype, static_cast<char*>(a_.out) + (t * a_.hidden + h0) * isz, rows);
    }
  }

  const MoeExpertsArgs& a_;
  const MoePlan& plan_;
  const bool fp8_;                    // FP8 experts, decoded to bf16 per piece / item
  std::vector<int64_t> block_begin_;  // [active + 1]: first packed block of each active expert
  std::vector<int64_t> piece_begin_;  // [active + 1]: first 12-row gate/up piece
  int64_t bw_h_ = 0, bw_i_ = 0;       // words per block of hidden / of the largest inter
  int64_t act_stride_ = 0;            // floats (and bf16 halves) per slot row
  float* gate_ = nullptr;             // [slots, act_stride]
  float* act_ = nullptr;              // [slots, act_stride]: up, then silu(gate) * up
};

}  // namespace

void moe_experts_bf16_dot(ThreadPool& pool, const MoeExpertsArgs& args, const MoePlan& plan) {
  Bf16DotMoe(args, plan).Run(pool);
}

}  // namespace kiln::cpu
