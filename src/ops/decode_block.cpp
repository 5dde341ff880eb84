// MoeBlockDecode: the checks and layout done once per block (prepare), and the per-token
// call, which checks only its two rows before one call through the decode_block table.
#include "kiln/ops/decode_block.h"

#include <cmath>
#include <utility>
#include <vector>

#include "backend/decode_block.h"
#include "core/memory_overlap.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/grad_mode.h"
#include "kiln/int_math.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/nn.h"  // rope_inv_freq
#include "kiln/scalar_types.h"  // kFp8ScaleBlock
#include "ops/moe_expert_checks.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

constexpr const char* kOp = "moe_block_decode";
constexpr const char* kAttentionOp = "attention_entry_decode";

bool is_wide_float(DType t) { return t == DType::Float32 || t == DType::BFloat16 || t == DType::Float16; }

Tensor float32_vector(const Tensor& t, int64_t n, const char* what, const char* op = kOp) {
  check_defined(t, op, what);
  KILN_CHECK(t.dim() == 1 && t.size(0) == n, op, "{} must be [{}], got {}", what, n, t.shape_str());
  KILN_CHECK_KIND(is_floating(t.dtype()), Type, op, "{} must be a float tensor, got {}", what, dtype_name(t.dtype()));
  return t.to(DType::Float32).contiguous();
}

// A one-token row: float32 [1, n] or [n], contiguous, on `device`, not requiring grad.
void check_row(const Tensor& t, const char* name, int64_t n, Device device, const char* op) {
  check_defined(t, op, name);
  KILN_CHECK(t.numel() == n && (t.dim() == 1 || (t.dim() == 2 && t.size(0) == 1)), op,
             "{} must be [1, {}] (one token), got {}", name, n, t.shape_str());
  KILN_CHECK_KIND(t.dtype() == DType::Float32, Type, op, "{} must be float32, got {}", name, dtype_name(t.dtype()));
  KILN_CHECK(t.is_contiguous(), op, "{} must be contiguous", name);
  KILN_CHECK(t.device() == device, op,
             "Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
             device.str(), t.device().str());
  KILN_CHECK(!(GradMode::is_enabled() && t.requires_grad()), op,
             "{} requires grad, but the fused decode block is not differentiable (use the unfused ops)", name);
}

// A projection [n, k] as the GEMV kernels read it, with its checked FP8 scales.
backend::LinearWeight projection(const char* what, const Tensor& w, const std::optional<Tensor>& scale, int64_t n,
                                 int64_t k, std::vector<Tensor>& keep) {
  check_defined(w, kAttentionOp, what);
  KILN_CHECK(w.dim() == 2 && w.size(0) == n && w.size(1) == k, kAttentionOp, "{} must be [{}, {}], got {}", what, n, k,
             w.shape_str());
  KILN_CHECK(w.stride(1) == 1, kAttentionOp, "{} must have unit stride inside its rows, got strides {}", what,
             shape_to_string(w.strides()));
  backend::LinearWeight lw{w.data_ptr(), w.dtype(), w.stride(0), n, k, nullptr, backend::Fp8ScaleLayout::PerRow};
  if (w.dtype() != DType::Float8_e4m3fn) {
    KILN_CHECK_KIND(is_wide_float(w.dtype()), Type, kAttentionOp,
                    "{} must be float32, bfloat16, float16 or float8_e4m3fn, got {}", what, dtype_name(w.dtype()));
    KILN_CHECK(!scale.has_value(), kAttentionOp, "{} is {}: scales are only for float8_e4m3fn weights", what,
               dtype_name(w.dtype()));
    return lw;
  }
  KILN_CHECK(scale.has_value() && scale->defined(), kAttentionOp, "{} is float8_e4m3fn and needs its float32 scales",
             what);
  KILN_CHECK_KIND(scale->dtype() == DType::Float32, Type, kAttentionOp, "{} scales must be float32, got {}", what,
                  dtype_name(scale->dtype()));
  const Shape per_row{n};
  const Shape per_block{ceil_div(n, kFp8ScaleBlock), ceil_div(k, kFp8ScaleBlock)};
  KILN_CHECK(scale->sizes() == per_row || scale->sizes() == per_block, kAttentionOp,
             "{} scales must be {} (per row) or {} (per 128x128 block), got {}", what, shape_to_string(per_row),
             shape_to_string(per_block), scale->shape_str());
  keep.push_back(scale->contiguous());
  lw.scale = keep.back().data<float>();
  lw.scale_layout = scale->dim() == 1 ? backend::Fp8ScaleLayout::PerRow : backend::Fp8ScaleLayout::Block128;
  return lw;
}

}  // namespace

struct MoeBlockDecode::State {
  Device device;
  Tensor norm_weight;  // float32 [hidden], 1 + w for a zero-centred norm
  Tensor router;
  Tensor selection_bias;
  moe_detail::CheckedExperts experts;
  backend::MoeBlockDecodeArgs args;  // every field but x and out
  double weight_bytes = 0;           // router, top_k experts and the shared expert
  double flops = 0;
};

std::optional<MoeBlockDecode> MoeBlockDecode::prepare(const MoeBlockDecodeConfig& c) {
  check_defined(c.router, kOp, "router");
  KILN_CHECK(c.router.dim() == 2 && c.router.size(0) >= 1 && c.router.size(1) >= 1, kOp,
             "router must be [experts, hidden], got {}", c.router.shape_str());
  const int64_t E = c.router.size(0), H = c.router.size(1);
  KILN_CHECK(static_cast<int64_t>(c.experts.experts.size()) == E, kOp,
             "the router has {} rows but {} experts are given", E, c.experts.experts.size());
  KILN_CHECK_KIND(c.top_k >= 1 && c.top_k <= E, Value, kOp, "top_k must be in [1, {}] (the number of experts), got {}",
                  E, c.top_k);
  KILN_CHECK_KIND(std::isfinite(c.routed_scaling_factor), Value, kOp, "routed_scaling_factor must be finite, got {}",
                  c.routed_scaling_factor);
  KILN_CHECK_KIND(c.renorm_eps >= 0.0 && std::isfinite(c.renorm_eps), Value, kOp,
                  "renorm_eps must be finite and >= 0, got {}", c.renorm_eps);
  KILN_CHECK_KIND(c.norm_eps >= 0.0 && std::isfinite(c.norm_eps), Value, kOp, "norm_eps must be finite and >= 0, got {}",
                  c.norm_eps);
  const Device device = c.router.device();
  // Other devices run the unfused ops, which check everything themselves.
  if (!backend::decode_block_kernels.has(device.type)) return std::nullopt;
  auto state = std::make_shared<State>();
  state->device = device;
  state->experts = moe_detail::check_experts(kOp, c.experts, c.shared, H, device);
  const Tensor norm = float32_vector(c.norm_weight, H, "norm_weight");
  // rms_norm_one_plus's scale, `1.0 + w` in float32, formed once instead of per token.
  state->norm_weight = c.norm_one_plus ? add(norm, Scalar(1.0)) : norm;
  if (c.selection_bias.has_value()) state->selection_bias = float32_vector(*c.selection_bias, E, "selection_bias");
  if (!is_wide_float(c.router.dtype())) return std::nullopt;
  KILN_CHECK(c.router.stride(1) == 1, kOp, "router must have unit stride inside its rows, got strides {}",
             shape_to_string(c.router.strides()));
  state->router = c.router;

  backend::MoeBlockDecodeArgs& a = state->args;
  a.hidden = H;
  a.norm_weight = state->norm_weight.data<float>();
  a.norm_eps = static_cast<double>(static_cast<float>(c.norm_eps));  // the float32 norm's eps
  a.router = {c.router.data_ptr(), c.router.dtype(), c.router.stride(0), E, H, nullptr,
              backend::Fp8ScaleLayout::PerRow};
  a.top_k = c.top_k;
  a.sigmoid = c.scoring == MoeScoring::Sigmoid;
  a.selection_bias = state->selection_bias.defined() ? state->selection_bias.data<float>() : nullptr;
  a.renormalize = c.renormalize;
  a.renorm_eps = c.renorm_eps;
  a.scaling = c.routed_scaling_factor;
  const moe_detail::CheckedExperts& x = state->experts;
  a.weight_dtype = x.weight_dtype;
  a.scale_layout = x.layout;
  a.experts = x.list.data();
  a.num_experts = E;
  a.shared = x.has_shared ? &x.shared_expert : nullptr;
  a.shared_gate = x.has_shared ? x.shared_gate.data<float>() : nullptr;

  // One token reads the router, its top_k distinct experts and the shared expert.
  const double item = static_cast<double>(itemsize(x.weight_dtype));
  const double expert = 3.0 * static_cast<double>(H) * static_cast<double>(x.list[0].inter);
  const double shared = x.has_shared ? 3.0 * static_cast<double>(H) * static_cast<double>(x.shared_expert.inter) : 0;
  const double router = static_cast<double>(E * H);
  state->weight_bytes = router * static_cast<double>(itemsize(c.router.dtype())) +
                        (static_cast<double>(c.top_k) * expert + shared) * item;
  state->flops = 2.0 * (router + static_cast<double>(c.top_k) * expert + shared);
  return MoeBlockDecode(std::move(state));
}

int64_t MoeBlockDecode::hidden() const { return state_->args.hidden; }

void MoeBlockDecode::operator()(const Tensor& x, const Tensor& out) const {
  const State& s = *state_;
  const int64_t H = s.args.hidden;
  check_row(x, "x", H, s.device, kOp);
  check_row(out, "out", H, s.device, kOp);
  check_no_overlap(out, x, kOp);
  backend::MoeBlockDecodeArgs a = s.args;
  a.x = x.data<float>();
  a.out = out.data<float>();
  const OpProfile profile(kOp, [&] { return OpCost{s.weight_bytes + 8.0 * static_cast<double>(H), s.flops}; });
  backend::decode_block_kernels.on(s.device, kOp).moe_block(current_context(), a);
}

struct AttentionEntryDecode::State {
  Device device;
  Tensor norm_weight, q_norm, k_norm, inv_freq;  // float32; the norms 1 + w where one_plus
  std::vector<Tensor> keep;                       // the weights and their contiguous scales
  Tensor q_out, gate_out;                         // the outputs, [1, heads, head_dim]
  backend::AttentionEntryDecodeArgs args;         // every field but x, position and the caches
  double weight_bytes = 0;
};

std::optional<AttentionEntryDecode> AttentionEntryDecode::prepare(const AttentionEntryDecodeConfig& c) {
  constexpr const char* op = kAttentionOp;
  check_defined(c.q_weight, op, "q_weight");
  KILN_CHECK(c.q_weight.dim() == 2, op, "q_weight must be [N, hidden], got {}", c.q_weight.shape_str());
  const int64_t H = c.q_weight.size(1);
  KILN_CHECK_KIND(c.num_heads > 0 && c.num_kv_heads > 0 && c.head_dim > 0, Value, op,
                  "heads, kv heads and head_dim must be > 0, got {}, {} and {}", c.num_heads, c.num_kv_heads,
                  c.head_dim);
  KILN_CHECK_KIND(c.num_heads % c.num_kv_heads == 0, Value, op,
                  "the number of query heads ({}) must be a multiple of the KV heads ({})", c.num_heads,
                  c.num_kv_heads);
  const int64_t rotary = c.rotary_dim == 0 ? c.head_dim : c.rotary_dim;
  KILN_CHECK_KIND(rotary >= 2 && rotary % 2 == 0 && rotary <= c.head_dim, Value, op,
                  "rotary_dim must be even and in [2, head_dim = {}], got {}", c.head_dim, rotary);
  KILN_CHECK_KIND(c.cache_dtype == DType::Float32 || c.cache_dtype == DType::BFloat16, Type, op,
                  "the cache dtype must be float32 or bfloat16, got {}", dtype_name(c.cache_dtype));
  for (double eps : {c.norm_eps, c.head_norm_eps}) {
    KILN_CHECK_KIND(eps >= 0.0 && std::isfinite(eps), Value, op, "norm eps must be finite and >= 0, got {}", eps);
  }
  const Device device = c.q_weight.device();
  if (!backend::decode_block_kernels.has(device.type)) return std::nullopt;  // the unfused ops run
  auto state = std::make_shared<State>();
  state->device = device;
  int64_t q_rows = 0, kv_rows = 0;
  KILN_CHECK(checked_mul(c.num_heads, c.head_dim, &q_rows) && checked_mul(q_rows, c.output_gate ? 2 : 1, &q_rows) &&
                 checked_mul(c.num_kv_heads, c.head_dim, &kv_rows),
             op, "heads {} and kv heads {} of head_dim {} overflow int64", c.num_heads, c.num_kv_heads, c.head_dim);
  backend::AttentionEntryDecodeArgs& a = state->args;
  a.q = projection("q_weight", c.q_weight, c.q_scale, q_rows, H, state->keep);
  a.k = projection("k_weight", c.k_weight, c.k_scale, kv_rows, H, state->keep);
  a.v = projection("v_weight", c.v_weight, c.v_scale, kv_rows, H, state->keep);
  common_device(op, {&c.q_weight, &c.k_weight, &c.v_weight});
  KILN_CHECK_KIND(a.k.dtype == a.q.dtype && a.v.dtype == a.q.dtype, Type, op,
                  "q, k and v weights must share one dtype, got {}, {} and {}", dtype_name(a.q.dtype),
                  dtype_name(a.k.dtype), dtype_name(a.v.dtype));
  KILN_CHECK(a.k.scale_layout == a.q.scale_layout && a.v.scale_layout == a.q.scale_layout, op,
             "q, k and v scales must use one layout (per row or per 128x128 block)");
  state->keep.insert(state->keep.end(), {c.q_weight, c.k_weight, c.v_weight});
  const Tensor norm = float32_vector(c.norm_weight, H, "norm_weight", op);
  state->norm_weight = c.norm_one_plus ? add(norm, Scalar(1.0)) : norm;
  const Tensor qn = float32_vector(c.q_norm, c.head_dim, "q_norm", op);
  const Tensor kn = float32_vector(c.k_norm, c.head_dim, "k_norm", op);
  state->q_norm = c.head_norm_one_plus ? add(qn, Scalar(1.0)) : qn;
  state->k_norm = c.head_norm_one_plus ? add(kn, Scalar(1.0)) : kn;
  if (c.head_dim % 8 != 0) return std::nullopt;
  state->inv_freq = rope_inv_freq(rotary, c.rope_theta);
  state->q_out = Tensor::empty({1, c.num_heads, c.head_dim}, c.cache_dtype, device, op);
  if (c.output_gate) state->gate_out = Tensor::empty({1, c.num_heads, c.head_dim}, DType::Float32, device, op);

  const bool fp8 = a.q.dtype == DType::Float8_e4m3fn;
  a.hidden = H;
  a.norm_weight = state->norm_weight.data<float>();
  a.norm_eps = static_cast<double>(static_cast<float>(c.norm_eps));
  a.proj_in = fp8 ? DType::Float32 : a.q.dtype;
  a.proj_out = fp8 ? DType::Float32 : a.q.dtype;
  a.heads = c.num_heads;
  a.kv_heads = c.num_kv_heads;
  a.head_dim = c.head_dim;
  a.output_gate = c.output_gate;
  a.q_norm = state->q_norm.data<float>();
  a.k_norm = state->k_norm.data<float>();
  a.head_norm_one_plus = c.head_norm_one_plus;
  a.head_norm_eps = static_cast<double>(static_cast<float>(c.head_norm_eps));
  a.rotary_dim = rotary;
  a.inv_freq = state->inv_freq.data<float>();
  a.cache_dtype = c.cache_dtype;
  a.q_out = state->q_out.data_ptr();
  a.gate_out = c.output_gate ? state->gate_out.data<float>() : nullptr;
  for (const Tensor* t : {&c.q_weight, &c.k_weight, &c.v_weight}) state->weight_bytes += static_cast<double>(t->nbytes());
  return AttentionEntryDecode(std::move(state));
}

AttentionEntryDecode::Output AttentionEntryDecode::operator()(const Tensor& x, const Tensor& k_cache,
                                                              const Tensor& v_cache, int64_t position) const {
  constexpr const char* op = kAttentionOp;
  const State& s = *state_;
  backend::AttentionEntryDecodeArgs a = s.args;
  check_row(x, "x", a.hidden, s.device, op);
  for (const auto& [t, name] : {std::pair{&k_cache, "k_cache"}, std::pair{&v_cache, "v_cache"}}) {
    check_defined(*t, op, name);
    KILN_CHECK(t->dim() == 4 && t->size(0) == 1 && t->size(1) == a.kv_heads && t->size(3) == a.head_dim &&
                   t->is_contiguous(),
               op, "{} must be a contiguous [1, {}, capacity, {}] tensor, got {}", name, a.kv_heads, a.head_dim,
               t->shape_str());
    KILN_CHECK_KIND(t->dtype() == a.cache_dtype, Type, op, "{} must be {} (the cache dtype), got {}", name,
                    dtype_name(a.cache_dtype), dtype_name(t->dtype()));
    KILN_CHECK(t->device() == s.device, op,
               "Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
               s.device.str(), t->device().str());
  }
  KILN_CHECK(k_cache.size(2) == v_cache.size(2), op, "k_cache and v_cache must have one capacity, got {} and {}",
             k_cache.size(2), v_cache.size(2));
  KILN_CHECK_KIND(position >= 0 && position < k_cache.size(2), Index, op,
                  "position {} is outside the cache of {} tokens", position, k_cache.size(2));
  check_no_overlap(k_cache, v_cache, op);
  a.x = x.data<float>();
  a.position = position;
  a.k_cache = k_cache.data_ptr();
  a.v_cache = v_cache.data_ptr();
  a.cache_capacity = k_cache.size(2);
  const OpProfile profile(op, [&] {
    const double flops = 2.0 * static_cast<double>(a.q.N + a.k.N + a.v.N) * static_cast<double>(a.hidden);
    return OpCost{s.weight_bytes + 4.0 * static_cast<double>(a.hidden), flops};
  });
  backend::decode_block_kernels.on(s.device, op).attention_entry(current_context(), a);
  return {s.q_out, s.gate_out};
}

}  // namespace kiln
