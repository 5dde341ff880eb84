// The fused attention-block entry for one token, compiled once per Highway target by
// attention_entry_decode_<weights>.cpp (internal).
//
// One parallel region (phased_region.h, a single phase): every thread first forms
// h = rms_norm(x), rounds it to the projections' input dtype, lays it out for the weight
// decoder and computes the token's RoPE angles (redundant per thread, a few microseconds
// at most); then the pieces are heads: each q head (with its gate half), k head and v
// head is projected with the one-row linear's GemvRows over the same rows as the linear
// op (head_dim is a multiple of 8 in every supported model, so its 8-row passes fall on
// the same rows), normalised, rotated and written out by the thread that projected it.
// The result is bit-identical to the unfused ops (tests/cpp/test_decode_block.cpp).

// Per-target include guard (Highway's pattern: the toggle flips once per target).
#if defined(KILN_BACKEND_CPU_ATTENTION_ENTRY_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_ATTENTION_ENTRY_DECODE_INL_H_
#undef KILN_BACKEND_CPU_ATTENTION_ENTRY_DECODE_INL_H_
#else
#define KILN_BACKEND_CPU_ATTENTION_ENTRY_DECODE_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/decode_block/phased_region.h"
#include "backend/cpu/linear/gemv-inl.h"
#include "backend/cpu/nn/norm_kernels.h"
#include "backend/cpu/nn/rope_kernels.h"
#include "backend/decode_block.h"
#include "kiln/context.h"
#include "kiln/int_math.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {

using backend::AttentionEntryDecodeArgs;

template <class Dec, DType kOut, bool kScaled, bool kBlocked>
struct AttentionEntryDecode {
  const ExecutionContext& ctx;
  const AttentionEntryDecodeArgs& a;
  int64_t x_stride;  // floats of the prepared row

  int64_t q_rows() const { return a.head_dim * (a.output_gate ? 2 : 1); }
  // Per-thread floats: h, h in proj_in, prepared x, cos, sin, the projections' output
  // rows (values of at most 4 bytes, at their row index), the float32 head, the rounding
  // buffer.
  int64_t local_floats() const {
    return 3 * x_stride + a.rotary_dim + std::max(a.q.N, a.k.N) + 2 * a.head_dim;
  }

  struct Local {
    float* xs = nullptr;
    float* cos = nullptr;
    float* sin = nullptr;
    float* proj = nullptr;
    float* head = nullptr;
    float* round = nullptr;
  };

  void enter(int, Local& l) const {
    float* base = ctx.scratch_of<float>(1, local_floats());
    float* h = base;
    rms_normalize_rows(a.x, 1, a.hidden, a.norm_eps, a.norm_weight, h);
    const void* x = h;
    if (a.proj_in != DType::Float32) {
      from_f32(h, a.proj_in, base + x_stride, a.hidden);  // the linear op's input rounding
      x = base + x_stride;
    }
    l.xs = base + 2 * x_stride;
    LinearActivations act;
    act.dtype = a.proj_in;
    act.x = x;
    PrepareX<Dec>(act, a.hidden, l.xs);
    const int64_t half = a.rotary_dim / 2;
    l.cos = base + 3 * x_stride;
    l.sin = l.cos + half;
    rope_cos_sin_cpu({&a.position, 1, a.inv_freq, half, l.cos, l.sin});
    l.proj = l.sin + half;
    l.head = l.proj + std::max(a.q.N, a.k.N);
    l.round = l.head + a.head_dim;
  }

  int64_t pieces(int, const Local&) const { return a.heads + 2 * a.kv_heads; }
  int64_t grain(int) const { return 1; }

  // Rows [n0, n0 + rows) of w, in proj_out, at their row index in l.proj; returns row n0.
  const void* Project(const LinearWeight& w, int64_t n0, int64_t rows, const Local& l) const {
    LinearActivations act;
    act.dtype = kOut;
    act.y = l.proj;
    GemvRows<Dec, kOut, kScaled, kBlocked>(w, act, l.xs, n0, n0 + rows);
    return static_cast<const char*>(static_cast<const void*>(l.proj)) + n0 * static_cast<int64_t>(itemsize(kOut));
  }

  // The q/k norm and RoPE of the proj_out head at `src`, into l.head (float32).
  void NormRotate(const void* src, const float* weight, const Local& l) const {
    const int64_t hd = a.head_dim;
    to_f32(kOut, src, l.head, hd);
    if (a.head_norm_one_plus) {
      rms_normalize_rows(l.head, 1, hd, a.head_norm_eps, weight, l.head);
    } else {
      // rms_norm_llama: the normalised head rounded to its input dtype, then * w.
      rms_normalize_rows(l.head, 1, hd, a.head_norm_eps, static_cast<const float*>(nullptr), l.head);
      if (kOut != DType::Float32) {
        from_f32(l.head, kOut, l.round, hd);
        to_f32(kOut, l.round, l.head, hd);
      }
      mul_rows(l.head, weight, l.head, 1, hd);
    }
    rope_rotate_token(l.head, l.cos, l.sin, l.head, 1, hd, a.rotary_dim, false);
  }

  void run(int, int64_t piece, Local& l) const {
    const int64_t hd = a.head_dim;
    const size_t item = itemsize(kOut);
    const size_t cache_item = itemsize(a.cache_dtype);
    if (piece < a.heads) {
      const void* row = Project(a.q, piece * q_rows(), q_rows(), l);
      NormRotate(row, a.q_norm, l);
      from_f32(l.head, a.cache_dtype, static_cast<char*>(a.q_out) + piece * hd * cache_item, hd);
      if (a.output_gate) to_f32(kOut, static_cast<const char*>(row) + hd * item, a.gate_out + piece * hd, hd);
      return;
    }
    const bool key = piece < a.heads + a.kv_heads;
    const int64_t g = key ? piece - a.heads : piece - a.heads - a.kv_heads;
    const int64_t offset = (g * a.cache_capacity + a.position) * hd;
    const void* row = Project(key ? a.k : a.v, g * hd, hd, l);
    if (key) {
      NormRotate(row, a.k_norm, l);
      from_f32(l.head, a.cache_dtype, static_cast<char*>(a.k_cache) + offset * cache_item, hd);
    } else {
      cast_strided(kOut, row, static_cast<int64_t>(item), a.cache_dtype,
                   static_cast<char*>(a.v_cache) + offset * cache_item, static_cast<int64_t>(cache_item), hd);
    }
  }
};

template <class Dec, DType kOut, bool kScaled, bool kBlocked>
void RunAttentionEntryDecode(const ExecutionContext& ctx, const AttentionEntryDecodeArgs& a) {
  const DF df;
  const int64_t step = StepOf<Dec>(df);
  AttentionEntryDecode<Dec, kOut, kScaled, kBlocked> work{ctx, a, ceil_div(a.hidden, step) * step};
  run_phases<1>(ctx.pool(), work);
}

}  // namespace
}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
