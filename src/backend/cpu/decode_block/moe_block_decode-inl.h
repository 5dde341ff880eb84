// The fused MoE decode block, compiled once per Highway target by
// moe_block_decode_<weights>.cpp (internal).
//
// out = x + moe(rms_norm(x)) for one token in one parallel region (phased_region.h):
//   enter   every thread: h = rms_norm(x) (its own copy, redundant and deterministic)
//   phase 0 router rows in 8-row groups (the one-row linear's GemvRows, so the logits
//           are the linear op's, rounded to the router's dtype)
//   enter   every thread: top-k routing of the logits (moe_route's per-token code), the
//           shared expert's gate, the slot plan and h in the experts' lane order
//   phase 1 gate/up (expert, 4-row group) pieces      } moe_experts' GEMV kernel
//   phase 2 silu(gate) * up per slot                   } (moe_experts-inl.h), piece
//   phase 3 down 4-row groups, then out = x + sum      } for piece
// Every step calls the same code as the unfused ops on the same row ranges, so the
// result is bit-identical to rms_norm -> linear -> moe_route -> moe_experts -> add_
// (tests/cpp/test_decode_block.cpp). Nothing is allocated per call once the scratch
// and the per-thread plan have grown to the model's sizes.

// Per-target include guard (Highway's pattern: the toggle flips once per target).
#if defined(KILN_BACKEND_CPU_MOE_BLOCK_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_MOE_BLOCK_DECODE_INL_H_
#undef KILN_BACKEND_CPU_MOE_BLOCK_DECODE_INL_H_
#else
#define KILN_BACKEND_CPU_MOE_BLOCK_DECODE_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/decode_block/phased_region.h"
#include "backend/cpu/moe/moe_experts-inl.h"
#include "backend/cpu/moe/moe_kernels.h"
#include "backend/cpu/moe/moe_plan.h"
#include "backend/cpu/nn/norm_kernels.h"
#include "backend/decode_block.h"
#include "kiln/context.h"
#include "kiln/int_math.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace {

using backend::MoeBlockDecodeArgs;

// The router's rows [n0, n1) against the prepared row xr; logits in the router dtype.
void RouterRows(const LinearWeight& w, const LinearActivations& act, const float* xr, int64_t n0, int64_t n1) {
  switch (w.dtype) {
    case DType::Float32: return GemvRows<F32Weights, DType::Float32, false, false>(w, act, xr, n0, n1);
    case DType::BFloat16: return GemvRows<Bf16Weights, DType::BFloat16, false, false>(w, act, xr, n0, n1);
    case DType::Float16: return GemvRows<F16Weights, DType::Float16, false, false>(w, act, xr, n0, n1);
    default: fail(ErrorKind::Type, "moe_block_decode", "unsupported router dtype {}", dtype_name(w.dtype));
  }
}

void PrepareRouterX(DType dtype, const void* x, int64_t K, float* xr) {
  LinearActivations act;
  act.dtype = dtype;
  act.x = x;
  switch (dtype) {
    case DType::Float32: return PrepareX<F32Weights>(act, K, xr);
    case DType::BFloat16: return PrepareX<Bf16Weights>(act, K, xr);
    case DType::Float16: return PrepareX<F16Weights>(act, K, xr);
    default: fail(ErrorKind::Type, "moe_block_decode", "unsupported router dtype {}", dtype_name(dtype));
  }
}

template <class Dec, bool kScaled, bool kBlocked>
struct MoeBlockDecode {
  using Kernel = MoeKernel<Dec, kScaled, kBlocked>;
  static constexpr int R = kRowsPerPass;
  static constexpr int kRouterRows = kGemvRowsPerPass;

  const ExecutionContext& ctx;
  const MoeBlockDecodeArgs& a;
  int64_t step;
  int64_t x_stride;    // floats of a prepared row (hidden padded to whole steps)
  int64_t act_stride;  // floats of a slot's gate/up row
  int64_t slots;       // top_k + the shared expert
  // Shared by the threads (the caller's scratch).
  void* logits;  // [E] in the router dtype
  float* gate;   // [slots, act_stride]
  float* act;    // [slots, act_stride]
  float* moe;    // [hidden]: the experts' sum, before the residual add

  // Per-thread scratch layout (floats): h, h rounded to the router dtype, the router's
  // prepared row, the experts' prepared row, logits as float32, scores, select, order,
  // weights, ids.
  int64_t local_floats() const { return 4 * x_stride + 4 * a.router.N + 2 * a.top_k; }

  struct Local {
    float* h = nullptr;
    float* xr = nullptr;
    float* xs = nullptr;
    float* route_weights = nullptr;
    int32_t* route_ids = nullptr;
    float* scratch = nullptr;
    MoePlan* plan = nullptr;
    MoeExpertsArgs expert_args;
    bool routed = false;
  };

  static MoePlan& ThreadPlan() {
    thread_local MoePlan plan;
    return plan;
  }

  void EnsureH(Local& l) const {
    if (l.h != nullptr) return;
    float* base = ctx.scratch_of<float>(1, local_floats());
    l.scratch = base;
    l.h = base;
    rms_normalize_rows(a.x, 1, a.hidden, a.norm_eps, a.norm_weight, l.h);
  }

  void EnsureRouted(Local& l) const {
    if (l.routed) return;
    EnsureH(l);
    const int64_t E = a.router.N;
    float* logits_f32 = l.scratch + 4 * x_stride;
    float* scores = logits_f32 + E;
    float* select = scores + E;
    int32_t* order = reinterpret_cast<int32_t*>(select + E);
    l.route_weights = reinterpret_cast<float*>(order + E);
    l.route_ids = reinterpret_cast<int32_t*>(l.route_weights + a.top_k);
    to_f32(a.router.dtype, logits, logits_f32, E);
    backend::MoeRouteArgs r;
    r.tokens = 1;
    r.experts = E;
    r.top_k = a.top_k;
    r.sigmoid = a.sigmoid;
    r.selection_bias = a.selection_bias;
    r.renormalize = a.renormalize;
    r.renorm_eps = a.renorm_eps;
    r.scaling = a.scaling;
    moe_route_token(r, logits_f32, scores, select, order, l.route_weights, l.route_ids);

    MoeExpertsArgs& e = l.expert_args;
    e.weight_dtype = a.weight_dtype;
    e.scale_layout = a.scale_layout;
    e.hidden = a.hidden;
    e.experts = a.experts;
    e.num_experts = a.num_experts;
    e.tokens = 1;
    e.top_k = a.top_k;
    e.ids = l.route_ids;
    e.weights = l.route_weights;
    e.shared = a.shared;
    e.shared_gate = a.shared_gate;
    e.act_dtype = DType::Float32;
    e.x = l.h;
    e.out = moe;
    l.plan = &ThreadPlan();
    fill_moe_plan(*l.plan, e, R);
    l.xs = l.scratch + 3 * x_stride;
    KernelOf(l).PrepareTokens(0, 1);
    l.routed = true;
  }

  Kernel KernelOf(const Local& l) const {
    return Kernel{l.expert_args, *l.plan, step, x_stride, act_stride, l.xs, gate, act};
  }

  void enter(int phase, Local& l) const {
    if (phase == 0) {
      EnsureH(l);
      // The linear op rounds its input to the weight's dtype first.
      const void* x = l.h;
      if (a.router.dtype != DType::Float32) {
        float* rounded = l.scratch + x_stride;
        from_f32(l.h, a.router.dtype, rounded, a.hidden);
        x = rounded;
      }
      l.xr = l.scratch + 2 * x_stride;
      PrepareRouterX(a.router.dtype, x, a.hidden, l.xr);
    } else {
      EnsureRouted(l);
    }
  }

  int64_t pieces(int phase, const Local& l) const {
    switch (phase) {
      case 0: return ceil_div(a.router.N, int64_t{kRouterRows});
      case 1: return l.plan->group_begin.back();
      case 2: return l.plan->slots;
      default: return ceil_div(a.hidden, int64_t{R});
    }
  }

  int64_t grain(int phase) const {
    const int64_t weight = static_cast<int64_t>(sizeof(typename Dec::T));
    switch (phase) {
      case 0: {
        const int64_t bytes = kRouterRows * a.hidden * static_cast<int64_t>(itemsize(a.router.dtype));
        return std::max<int64_t>(1, kMinChunkBytes / bytes);
      }
      case 1: return std::max<int64_t>(1, kMinChunkBytes / (2 * R * a.hidden * weight));
      case 2: return std::max<int64_t>(1, 16384 / act_stride);
      default: {
        const int64_t bytes = R * act_stride * weight * slots;
        return std::max<int64_t>(1, kMinChunkBytes / bytes);
      }
    }
  }

  void run(int phase, int64_t piece, Local& l) const {
    switch (phase) {
      case 0: {
        LinearActivations act_args;
        act_args.dtype = a.router.dtype;
        act_args.y = logits;
        const int64_t n0 = piece * kRouterRows;
        RouterRows(a.router, act_args, l.xr, n0, std::min(a.router.N, n0 + kRouterRows));
        return;
      }
      case 1: {
        const MoePlan& plan = *l.plan;
        const size_t k =
            std::upper_bound(plan.group_begin.begin(), plan.group_begin.end(), piece) - plan.group_begin.begin() - 1;
        KernelOf(l).GateUpGroup(plan.active[k], piece - plan.group_begin[k]);
        return;
      }
      case 2: KernelOf(l).FinishSlot(piece); return;
      default: {
        float acc[R];
        KernelOf(l).DownGroup(piece, acc);
        const int64_t n0 = piece * R;
        const int64_t n1 = std::min(a.hidden, n0 + R);
        // add_'s arithmetic: x + y in float32.
        for (int64_t n = n0; n < n1; ++n) a.out[n] = a.x[n] + moe[n];
        return;
      }
    }
  }
};

template <class Dec, bool kScaled, bool kBlocked>
void RunMoeBlockDecode(const ExecutionContext& ctx, const MoeBlockDecodeArgs& a) {
  const DF df;
  const int64_t step = StepOf<Dec>(df);
  const auto round_up = [&](int64_t n) { return ceil_div(n, step) * step; };
  int64_t max_inter = a.num_experts > 0 ? a.experts[0].inter : 0;
  for (int64_t e = 1; e < a.num_experts; ++e) max_inter = std::max(max_inter, a.experts[e].inter);
  if (a.shared != nullptr) max_inter = std::max(max_inter, a.shared->inter);
  const int64_t x_stride = round_up(a.hidden);
  const int64_t act_stride = round_up(std::max<int64_t>(max_inter, 1));
  const int64_t slots = a.top_k + (a.shared != nullptr ? 1 : 0);
  // Shared buffers from the caller's scratch (slot 0; the threads' own work is in slot 1).
  const int64_t logits_floats = ceil_div(a.router.N * static_cast<int64_t>(itemsize(a.router.dtype)),
                                         static_cast<int64_t>(sizeof(float)));
  const int64_t logits_padded = ceil_div(logits_floats, int64_t{16}) * 16;  // own cache lines
  float* shared = ctx.scratch_of<float>(0, logits_padded + 2 * slots * act_stride + x_stride);
  MoeBlockDecode<Dec, kScaled, kBlocked> work{ctx,
                                              a,
                                              step,
                                              x_stride,
                                              act_stride,
                                              slots,
                                              shared,
                                              shared + logits_padded,
                                              shared + logits_padded + slots * act_stride,
                                              shared + logits_padded + 2 * slots * act_stride};
  run_phases<4>(ctx.pool(), work);
}

}  // namespace
}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
