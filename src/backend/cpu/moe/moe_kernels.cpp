// MoE routing and permutation (plain C++: [T, E] problems far below a millisecond) and
// the host side of the fused expert kernel: the slot plan, scratch and dispatch by weight
// dtype.
#include "backend/cpu/moe/moe_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/moe/moe_plan.h"
#include "kiln/allocator.h"
#include "kiln/cpu_features.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::cpu {

namespace {

// The shared expert's weight per token: sigmoid(x[t] . gate), the dot product in float64.
void shared_gate_weights(const MoeExpertsArgs& a, std::vector<float>& weights, std::vector<float>& row) {
  const int64_t H = a.hidden;
  weights.resize(static_cast<size_t>(a.tokens));
  row.resize(static_cast<size_t>(H));
  const size_t item = itemsize(a.act_dtype);
  for (int64_t t = 0; t < a.tokens; ++t) {
    to_f32(a.act_dtype, static_cast<const char*>(a.x) + t * H * item, row.data(), H);
    double dot = 0.0;
    for (int64_t h = 0; h < H; ++h) dot += static_cast<double>(row[h]) * a.shared_gate[h];
    weights[t] = static_cast<float>(1.0 / (1.0 + std::exp(-dot)));
  }
}

}  // namespace

MoePlan make_moe_plan(const MoeExpertsArgs& a, int64_t rows_per_group) {
  MoePlan plan;
  fill_moe_plan(plan, a, rows_per_group);
  return plan;
}

void fill_moe_plan(MoePlan& plan, const MoeExpertsArgs& a, int64_t rows_per_group) {
  plan.tokens = a.tokens;
  plan.top_k = a.top_k;
  plan.max_inter = 0;
  const int64_t routed = a.tokens * a.top_k;
  const bool shared = a.shared != nullptr;
  plan.slots = routed + (shared ? a.tokens : 0);
  if (shared) {
    shared_gate_weights(a, plan.shared_weight, plan.x_row);
  } else {
    plan.shared_weight.clear();
  }
  const int64_t experts = a.num_experts + 1;  // the last index is the shared expert
  plan.expert_of_slot.resize(static_cast<size_t>(plan.slots));
  for (int64_t s = 0; s < routed; ++s) plan.expert_of_slot[s] = a.ids[s];
  for (int64_t s = routed; s < plan.slots; ++s) plan.expert_of_slot[s] = static_cast<int32_t>(a.num_experts);
  // Counting sort of the slots by expert (stable: tokens stay ascending).
  plan.slot_begin.assign(static_cast<size_t>(experts + 1), 0);
  for (int32_t e : plan.expert_of_slot) ++plan.slot_begin[e + 1];
  std::partial_sum(plan.slot_begin.begin(), plan.slot_begin.end(), plan.slot_begin.begin());
  plan.slot_list.resize(static_cast<size_t>(plan.slots));
  plan.fill_position.assign(plan.slot_begin.begin(), plan.slot_begin.end() - 1);
  for (int64_t s = 0; s < plan.slots; ++s) {
    plan.slot_list[plan.fill_position[plan.expert_of_slot[s]]++] = static_cast<int32_t>(s);
  }
  plan.active.clear();
  plan.group_begin.assign(1, 0);
  for (int64_t e = 0; e < experts; ++e) {
    if (plan.slot_begin[e + 1] == plan.slot_begin[e]) continue;
    const int64_t inter = e < a.num_experts ? a.experts[e].inter : a.shared->inter;
    if (inter == 0) continue;  // contributes exactly zero
    plan.active.push_back(e);
    plan.max_inter = std::max(plan.max_inter, inter);
    plan.group_begin.push_back(plan.group_begin.back() + ceil_div(inter, rows_per_group));
  }
}

MoeScratch::MoeScratch(int64_t floats) : bytes_(static_cast<size_t>(std::max<int64_t>(floats, 1)) * sizeof(float)) {
  data_ = static_cast<float*>(allocate_bytes(bytes_));
}

MoeScratch::~MoeScratch() { free_bytes(data_, bytes_); }

namespace {

// The tiled kernel from this many routed slots per active expert on (the mean over the
// call; the shared expert counts as one expert with a slot per token). Below it the GEMV
// kernel wins: with one or two tokens per expert a tile of 4 tokens is mostly empty, and
// the GEMV kernel's prefetch keeps more weight lines in flight. Measured on 2 cores with
// the Qwen3-30B-A3B expert shapes (128 experts, top 8, H 2048, I 768), tiled against
// GEMV: bf16 1.1x at 1 token per expert, 1.35x at 4, 2.75x at 32; FP8 (row scales) 0.6x at
// 1, 1.1x at 4, 2.1x at 32 (docs/bench.md).
constexpr int64_t kTiledMinTokensPerExpert = 4;

// The bf16 dot tiles (moe_experts_bf16_dot.cpp) from this many slots per active expert
// on, the float32 FMA tiles below it. The dot tiles broadcast weight pairs against 8 or
// 16 tokens a register, so an expert with a few tokens leaves most lanes empty, where
// the FMA tiles run 16 K values a register whatever the token count. Measured on a Zen 4
// (one thread, CPU time per call, 32 of Qwen3-30B-A3B's experts, FMA tiles / dot tiles,
// the dot tiles with their row and FP8 code prefetches): 4 tokens per expert bf16
// 29.6-31.8 / 35.3-36.2 ms, FP8 rows 29.4-35.5 / 35.0-41.6, FP8 blocks 33.2-33.5 /
// 33.0-35.1; 8 tokens bf16 43.2-46.7 / 34.4-35.8, FP8 rows 40.3-44.5 / 37.2-39.1, FP8
// blocks 51.9-56.4 / 35.0-41.1 (docs/bench.md).
constexpr int64_t kDotMinTokensPerExpert = 6;

std::atomic<MoeExpertPath> forced_path{MoeExpertPath::Auto};

bool use_tiled(const MoePlan& plan) {
  switch (forced_path.load(std::memory_order_relaxed)) {
    case MoeExpertPath::Gemv: return false;
    case MoeExpertPath::Tiled: return true;
    case MoeExpertPath::Auto: break;
  }
  return plan.slots >= kTiledMinTokensPerExpert * static_cast<int64_t>(plan.active.size());
}

}  // namespace

void force_moe_expert_path(MoeExpertPath path) { forced_path.store(path, std::memory_order_relaxed); }

void moe_experts(ThreadPool& pool, const MoeExpertsArgs& args) {
  // 4 rows per group: gemv-inl.h's kRowsPerPass, the unit DotRows works in.
  const MoePlan plan = make_moe_plan(args, 4);
  const bool fp8 = args.weight_dtype == DType::Float8_e4m3fn;
  if (use_tiled(plan)) {
    // bf16 and FP8 experts (decoded exactly to bf16) on the bf16 dot tiles where the CPU
    // has them, KILN_BF16_DOT allows and the experts have enough tokens each (always when
    // the tiled path is forced); float32 FMA tiles otherwise.
    const bool dot_worth_it = forced_path.load(std::memory_order_relaxed) == MoeExpertPath::Tiled ||
                              plan.slots >= kDotMinTokensPerExpert * static_cast<int64_t>(plan.active.size());
    if ((fp8 || args.weight_dtype == DType::BFloat16) && bf16_dot_enabled() && dot_worth_it) {
      moe_experts_bf16_dot(pool, args, plan);
    } else if (fp8) {
      moe_experts_tiled_fp8(pool, args, plan);
    } else {
      moe_experts_tiled_wide(pool, args, plan);
    }
  } else if (fp8) {
    moe_experts_fp8(pool, args, plan);
  } else {
    moe_experts_wide(pool, args, plan);
  }
}

// Token t's k choices: the k largest selection values, NaN first (as torch.topk ranks
// NaN above every number), ties to the lower expert id.
void moe_route_token(const MoeRouteArgs& a, const float* logits, float* scores, float* select, int32_t* order,
                 float* weights, int32_t* ids) {
  const int64_t E = a.experts;
  if (a.sigmoid) {
    for (int64_t e = 0; e < E; ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  } else {
    float max = -INFINITY;
    bool nan = false;
    for (int64_t e = 0; e < E; ++e) {
      nan |= std::isnan(logits[e]);
      max = std::max(max, logits[e]);
    }
    double sum = 0.0;
    for (int64_t e = 0; e < E; ++e) {
      scores[e] = std::exp(logits[e] - max);
      sum += scores[e];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t e = 0; e < E; ++e) scores[e] = nan ? NAN : scores[e] * inv;
  }
  for (int64_t e = 0; e < E; ++e) select[e] = scores[e] + (a.selection_bias != nullptr ? a.selection_bias[e] : 0.0f);
  std::iota(order, order + E, 0);
  std::partial_sort(order, order + a.top_k, order + E, [&](int32_t x, int32_t y) {
    const bool nx = std::isnan(select[x]), ny = std::isnan(select[y]);
    if (nx != ny) return nx;
    if (!nx && select[x] != select[y]) return select[x] > select[y];
    return x < y;
  });
  float sum = 0.0f;
  for (int64_t j = 0; j < a.top_k; ++j) {
    ids[j] = order[j];
    weights[j] = scores[order[j]];
    sum += weights[j];
  }
  const float norm = a.renormalize ? static_cast<float>(sum + a.renorm_eps) : 1.0f;
  for (int64_t j = 0; j < a.top_k; ++j) {
    if (a.renormalize) weights[j] /= norm;
    weights[j] = static_cast<float>(weights[j] * a.scaling);
  }
}

void moe_route(ThreadPool& pool, const MoeRouteArgs& a) {
  const int64_t E = a.experts;
  pool.parallel_for(a.tokens, std::max<int64_t>(1, 32768 / E), [&](int64_t t0, int64_t t1) {
    std::vector<float> scores(static_cast<size_t>(E)), select(static_cast<size_t>(E));
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int64_t t = t0; t < t1; ++t) {
      moe_route_token(a, a.logits + t * E, scores.data(), select.data(), order.data(), a.weights + t * a.top_k,
                  a.ids + t * a.top_k);
    }
  });
}

void moe_permute(const MoePermuteArgs& a) {
  for (int64_t s = 0; s < a.slots; ++s) {
    KILN_CHECK_KIND(a.ids[s] >= 0 && a.ids[s] < a.num_experts, Index, "moe_permute",
                    "expert id {} out of range for {} experts", a.ids[s], a.num_experts);
  }
  // Counting sort: count[e + 1] is expert e's run length, then its start.
  std::vector<int64_t> count(static_cast<size_t>(a.num_experts) + 1, 0);
  for (int64_t s = 0; s < a.slots; ++s) ++count[a.ids[s] + 1];
  for (int64_t e = 0; e < a.num_experts; ++e) {
    count[e + 1] += count[e];
    a.offs[e] = static_cast<int32_t>(count[e + 1]);
  }
  for (int64_t s = 0; s < a.slots; ++s) {
    const int64_t dst = count[a.ids[s]]++;
    a.token_index[dst] = s / a.top_k;
    a.slot[dst] = s;
  }
}

}  // namespace kiln::cpu
