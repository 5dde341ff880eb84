// The fused MoE expert kernel, compiled once per Highway target by
// moe_experts_<weights>.cpp (internal; the phases are described in moe_kernels.h).
//
// It reuses gemv-inl.h wholesale: the weight decoders, PrepareX (x to float32 in the
// decoder's lane order) and DotRows (4 weight rows against one prepared x, with the
// next-pass prefetch), so the expert block streams weights exactly as fast as the
// one-row linear does.

// Per-target include guard (Highway's pattern: the toggle flips once per target).
#if defined(KILN_BACKEND_CPU_MOE_EXPERTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_MOE_EXPERTS_INL_H_
#undef KILN_BACKEND_CPU_MOE_EXPERTS_INL_H_
#else
#define KILN_BACKEND_CPU_MOE_EXPERTS_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/elementwise/activation_fused_kernels.h"
#include "backend/cpu/cast/cast.h"
#include "backend/cpu/linear/gemv-inl.h"
#include "backend/cpu/moe/moe_plan.h"
#include "kiln/int_math.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {

template <class Dec, bool kScaled, bool kBlocked>
struct MoeKernel {
  using T = typename Dec::T;
  static constexpr int R = kRowsPerPass;
  static constexpr float kUndoDecode = 1.0f / Dec::kDecodedPerReal;  // a power of two: exact

  const MoeExpertsArgs& a;
  const MoePlan& plan;
  int64_t step;        // weights per decoder step on this target
  int64_t x_stride;    // floats per prepared token row (hidden padded to whole steps)
  int64_t act_stride;  // floats per slot activation row (max inter padded to whole steps)
  float* xs;           // [tokens, x_stride]
  float* gate;         // [slots, act_stride]
  float* act;          // [slots, act_stride]: up, then silu(gate) * up in decoder order

  const SwigluExpert& expert(int64_t e) const { return e < a.num_experts ? a.experts[e] : *a.shared; }

  // 4 (or `rows` < 4 at a tail) rows of m starting at row n against the prepared vector
  // v of length K: out[r] = real dot product (decode factor and per-row scales undone).
  void Dot(const ExpertMatrix& m, int64_t cols, int64_t n, int rows, const float* v, int64_t K, float* out) const {
    const T* base = static_cast<const T*>(m.data) + n * m.row_stride;
    const float* block_scale = nullptr;
    if constexpr (kBlocked) {
      const int64_t col_blocks = ceil_div(cols, kFp8ScaleBlock);
      block_scale = m.scale + n / kFp8ScaleBlock * col_blocks;
    }
    if (rows == R) {
      DotRows<Dec, R, kBlocked>(base, m.row_stride, v, K, block_scale, out);
    } else {
      for (int r = 0; r < rows; ++r) DotRows<Dec, 1, kBlocked>(base + r * m.row_stride, 0, v, K, block_scale, out + r);
    }
    for (int r = 0; r < rows; ++r) {
      out[r] *= kUndoDecode;
      if constexpr (kScaled && !kBlocked) out[r] *= m.scale[n + r];
    }
  }

  void PrepareTokens(int64_t t0, int64_t t1) const {
    const size_t x_bytes = static_cast<size_t>(a.hidden) * itemsize(a.act_dtype);
    for (int64_t t = t0; t < t1; ++t) {
      LinearActivations row;
      row.dtype = a.act_dtype;
      row.x = static_cast<const char*>(a.x) + t * x_bytes;
      PrepareX<Dec>(row, a.hidden, xs + t * x_stride);
    }
  }

  // Gate and up rows [4 g, 4 g + 4) of expert e for every slot routed to it.
  void GateUpGroup(int64_t e, int64_t g) const {
    const SwigluExpert& ex = expert(e);
    const int64_t n = g * R;
    const int rows = static_cast<int>(std::min<int64_t>(R, ex.inter - n));
    for (int64_t i = plan.slot_begin[e]; i < plan.slot_begin[e + 1]; ++i) {
      const int64_t slot = plan.slot_list[i];
      const float* v = xs + plan.token_of(slot) * x_stride;
      float g_sums[R], u_sums[R];
      Dot(ex.gate, a.hidden, n, rows, v, a.hidden, g_sums);
      Dot(ex.up, a.hidden, n, rows, v, a.hidden, u_sums);
      for (int r = 0; r < rows; ++r) {
        gate[slot * act_stride + n + r] = g_sums[r];
        act[slot * act_stride + n + r] = u_sums[r];
      }
    }
  }

  // act = silu(gate) * up, zero-padded to whole steps and put in the decoder's order:
  // it is the x of the down projection (a bf16 dot decoder rounds it to bf16 there, as
  // PrepareX does the tokens; gemv-inl.h).
  void FinishSlot(int64_t slot) const {
    const int64_t inter = expert(plan.expert_of_slot[slot]).inter;
    float* row = act + slot * act_stride;
    mul_silu(row, gate + slot * act_stride, row, inter);
    const int64_t padded = ceil_div(inter, step) * step;
    std::fill(row + inter, row + padded, 0.0f);
    if constexpr (Dec::kPermutesX) {
      for (int64_t k = 0; k < padded; k += step) Dec::ArrangeX(row + k);
    }
  }

  // Output rows [4 g, 4 g + 4) of every token: sum over the active experts' down rows.
  void DownGroup(int64_t g, float* acc) const {
    const int64_t n = g * R;
    const int rows = static_cast<int>(std::min<int64_t>(R, a.hidden - n));
    std::fill(acc, acc + a.tokens * R, 0.0f);
    for (int64_t e : plan.active) {
      const SwigluExpert& ex = expert(e);
      for (int64_t i = plan.slot_begin[e]; i < plan.slot_begin[e + 1]; ++i) {
        const int64_t slot = plan.slot_list[i];
        const int64_t t = plan.token_of(slot);
        float sums[R];
        Dot(ex.down, ex.inter, n, rows, act + slot * act_stride, ex.inter, sums);
        const float w = plan.weight_of(slot, a);
        for (int r = 0; r < rows; ++r) acc[t * R + r] += w * sums[r];
      }
    }
    const size_t item = itemsize(a.act_dtype);
    for (int64_t t = 0; t < a.tokens; ++t) {
      from_f32(acc + t * R, a.act_dtype, static_cast<char*>(a.out) + (t * a.hidden + n) * item, rows);
    }
  }

  void Run(ThreadPool& pool) const {
    // 1. Tokens to float32 once.
    pool.parallel_for(a.tokens, std::max<int64_t>(1, 65536 / a.hidden), [&](int64_t t0, int64_t t1) {
      PrepareTokens(t0, t1);
    });
    // 2. Gate and up: the (expert, 4-row group) pieces of all active experts, in expert
    // order, so each thread streams whole stretches of consecutive rows.
    const int64_t pieces = plan.group_begin.back();
    const int64_t hidden_bytes = a.hidden * static_cast<int64_t>(sizeof(T));
    const int64_t piece_bytes = 2 * R * hidden_bytes;
    pool.parallel_for(pieces, std::max<int64_t>(1, kMinChunkBytes / piece_bytes), [&](int64_t p0, int64_t p1) {
      size_t k = std::upper_bound(plan.group_begin.begin(), plan.group_begin.end(), p0) - plan.group_begin.begin() - 1;
      for (int64_t p = p0; p < p1; ++p) {
        while (p >= plan.group_begin[k + 1]) ++k;
        GateUpGroup(plan.active[k], p - plan.group_begin[k]);
      }
    });
    pool.parallel_for(plan.slots, std::max<int64_t>(1, 16384 / act_stride), [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) FinishSlot(s);
    });
    // 3. Down: 4-row groups of the hidden dim, each owning its output rows.
    const int64_t groups = ceil_div(a.hidden, R);
    int64_t down_group_bytes = 0;
    for (int64_t e : plan.active) down_group_bytes += R * expert(e).inter * static_cast<int64_t>(sizeof(T));
    pool.parallel_for(groups, std::max<int64_t>(1, kMinChunkBytes / std::max<int64_t>(1, down_group_bytes)),
                      [&](int64_t g0, int64_t g1) {
                        std::vector<float> acc(static_cast<size_t>(a.tokens * R));
                        for (int64_t g = g0; g < g1; ++g) DownGroup(g, acc.data());
                      });
  }
};

template <class Dec, bool kScaled, bool kBlocked>
void RunMoeExperts(ThreadPool& pool, const MoeExpertsArgs& a, const MoePlan& plan) {
  const DF df;
  const int64_t step = StepOf<Dec>(df);
  const auto round_up = [&](int64_t n) { return ceil_div(n, step) * step; };
  const int64_t x_stride = round_up(a.hidden);
  const int64_t act_stride = round_up(std::max<int64_t>(plan.max_inter, 1));
  MoeScratch scratch(a.tokens * x_stride + 2 * plan.slots * act_stride);
  float* xs = scratch.data();
  float* gate = xs + a.tokens * x_stride;
  float* act = gate + plan.slots * act_stride;
  MoeKernel<Dec, kScaled, kBlocked>{a, plan, step, x_stride, act_stride, xs, gate, act}.Run(pool);
}

}  // namespace
}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
