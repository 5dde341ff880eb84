// moe_route, moe_permute, MoeExperts::from_fused and moe_experts: validation, dtype
// handling and views (front ends; kernels behind backend/moe.h).
#include "kiln/ops/moe.h"

#include <cmath>
#include <vector>

#include "backend/moe.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/scalar_types.h"  // kFp8ScaleBlock
#include "ops/autograd_hooks.h"
#include "ops/autograd_hooks_linalg.h"
#include "ops/moe_expert_checks.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

bool is_activation_dtype(DType t) { return t == DType::Float32 || t == DType::BFloat16 || t == DType::Float16; }

// A contiguous float32 copy (or the tensor itself when it already is one).
Tensor as_f32(const Tensor& t) { return t.to(DType::Float32).contiguous(); }

// The routing pair of moe_experts: ids int32 and weights float32, both [T, k].
struct CheckedRouting {
  Tensor weights, ids;
};

CheckedRouting check_routing(const char* op, const Tensor& weights, const Tensor& ids, int64_t tokens,
                             int64_t num_experts) {
  check_defined(weights, op, "weights");
  check_defined(ids, op, "ids");
  KILN_CHECK(ids.dim() == 2 && ids.size(0) == tokens, op, "ids must be [{}, top_k] (one row per token), got shape {}",
             tokens, ids.shape_str());
  KILN_CHECK(weights.sizes() == ids.sizes(), op, "weights must have the shape of ids {}, got {}", ids.shape_str(),
             weights.shape_str());
  KILN_CHECK_KIND(ids.dtype() == DType::Int32 || ids.dtype() == DType::Int64, Type, op,
                  "ids must be int32 or int64, got {}", dtype_name(ids.dtype()));
  KILN_CHECK_KIND(is_floating(weights.dtype()), Type, op, "weights must be a float tensor, got {}",
                  dtype_name(weights.dtype()));
  if (ids.device().type != DeviceType::CPU) {
    // Read where they are: checking the range here would wait for the device. Its
    // kernels turn a token with an id outside [0, num_experts) into a NaN row instead.
    KILN_CHECK_KIND(ids.dtype() == DType::Int32, Type, op, "ids on {} must be int32 (as moe_route returns), got {}",
                    ids.device().str(), dtype_name(ids.dtype()));
    return {as_f32(weights), ids.contiguous()};
  }
  CheckedRouting r{as_f32(weights), ids.to(DType::Int64).contiguous()};
  const int64_t* id = r.ids.data<int64_t>();
  for (int64_t i = 0; i < r.ids.numel(); ++i) {
    KILN_CHECK_KIND(id[i] >= 0 && id[i] < num_experts, Index, op, "expert id {} out of range for {} experts", id[i],
                    num_experts);
  }
  r.ids = r.ids.to(DType::Int32);
  return r;
}

}  // namespace

namespace moe_detail {

// One projection [rows, cols] of an expert, with its checked float32 scales.
backend::ExpertMatrix expert_matrix(const char* op, const char* what, const Tensor& w, const std::optional<Tensor>& scale,
                                int64_t rows, int64_t cols, backend::Fp8ScaleLayout* layout, bool* layout_known,
                                std::vector<Tensor>& keep) {
  KILN_CHECK(w.defined() && w.dim() == 2 && w.size(0) == rows && w.size(1) == cols, op,
             "{} must have shape [{}, {}], got {}", what, rows, cols, w.defined() ? w.shape_str() : "undefined");
  KILN_CHECK(cols <= 1 || w.stride(1) == 1, op, "{} must have unit stride inside its rows, got strides {}", what,
             shape_to_string(w.strides()));
  backend::ExpertMatrix m{w.data_ptr(), w.stride(0), nullptr};
  if (w.dtype() != DType::Float8_e4m3fn) {
    KILN_CHECK(!scale.has_value(), op, "{} is {}: scales are only for float8_e4m3fn weights", what,
               dtype_name(w.dtype()));
    return m;
  }
  KILN_CHECK(scale.has_value() && scale->defined(), op, "{} is float8_e4m3fn and needs its float32 scales", what);
  KILN_CHECK_KIND(scale->dtype() == DType::Float32, Type, op, "{} scales must be float32, got {}", what,
                  dtype_name(scale->dtype()));
  const Shape per_row{rows};
  const Shape per_block{ceil_div(rows, kFp8ScaleBlock), ceil_div(cols, kFp8ScaleBlock)};
  KILN_CHECK(scale->sizes() == per_row || scale->sizes() == per_block, op,
             "{} scales must be {} (per row) or {} (per 128x128 block), got {}", what, shape_to_string(per_row),
             shape_to_string(per_block), scale->shape_str());
  const auto this_layout = scale->dim() == 1 ? backend::Fp8ScaleLayout::PerRow : backend::Fp8ScaleLayout::Block128;
  // A [1, 1] grid reads the same either way; only a real mismatch is refused.
  KILN_CHECK(!*layout_known || this_layout == *layout || per_row == per_block, op,
             "all expert scales must use one layout (per row or per 128x128 block)");
  if (!*layout_known) {
    *layout = this_layout;
    *layout_known = true;
  }
  KILN_CHECK(scale->device() == w.device(), op,
             "Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
             w.device().str(), scale->device().str());
  keep.push_back(scale->contiguous());
  m.scale = keep.back().data<float>();
  return m;
}

backend::SwigluExpert swiglu_expert(const char* op, const SwigluWeights& w, int64_t hidden, DType dtype,
                                backend::Fp8ScaleLayout* layout, bool* layout_known, std::vector<Tensor>& keep) {
  KILN_CHECK(w.gate.defined() && w.gate.dim() == 2, op, "expert gate must be a 2-D [inter, hidden] matrix");
  const int64_t inter = w.gate.size(0);
  for (const Tensor* t : {&w.gate, &w.up, &w.down}) {
    KILN_CHECK_KIND(t->defined() && t->dtype() == dtype, Type, op,
                    "all expert weights must share one dtype ({}), got {}", dtype_name(dtype),
                    t->defined() ? dtype_name(t->dtype()) : "undefined");
  }
  backend::SwigluExpert e;
  e.inter = inter;
  e.gate = expert_matrix(op, "expert gate", w.gate, w.gate_scale, inter, hidden, layout, layout_known, keep);
  e.up = expert_matrix(op, "expert up", w.up, w.up_scale, inter, hidden, layout, layout_known, keep);
  e.down = expert_matrix(op, "expert down", w.down, w.down_scale, hidden, inter, layout, layout_known, keep);
  return e;
}

CheckedExperts check_experts(const char* op, const MoeExperts& experts, const std::optional<SharedExpert>& shared,
                              int64_t hidden, Device device) {
  KILN_CHECK(!experts.experts.empty(), op, "no experts given");
  for (const SwigluWeights& e : experts.experts) {
    // Per call, not per element: E device checks against a kernel reading E matrices.
    const Device expert = common_device(op, {&e.gate, &e.up, &e.down});
    KILN_CHECK(expert == device || !e.gate.defined(), op,
               "Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
               device.str(), expert.str());
  }
  CheckedExperts c;
  c.weight_dtype = experts.experts[0].gate.defined() ? experts.experts[0].gate.dtype() : DType::Float32;
  KILN_CHECK_KIND(is_activation_dtype(c.weight_dtype) || c.weight_dtype == DType::Float8_e4m3fn, Type, op,
                  "expert weights must be float32, bfloat16, float16 or float8_e4m3fn, got {}",
                  dtype_name(c.weight_dtype));
  bool layout_known = false;
  c.list.reserve(experts.experts.size());
  const int64_t inter = experts.experts[0].gate.defined() ? experts.experts[0].gate.size(0) : 0;
  for (const SwigluWeights& w : experts.experts) {
    c.list.push_back(swiglu_expert(op, w, hidden, c.weight_dtype, &c.layout, &layout_known, c.keep));
    KILN_CHECK(c.list.back().inter == inter, op, "all experts must have one intermediate size ({}), got {}", inter,
               c.list.back().inter);
  }
  if (shared.has_value()) {
    c.shared_expert = swiglu_expert(op, shared->weights, hidden, c.weight_dtype, &c.layout, &layout_known, c.keep);
    const Tensor& g = shared->gate_weight;
    const Device shared_device = common_device(op, {&shared->weights.gate, &shared->weights.up, &shared->weights.down, &g});
    KILN_CHECK(shared_device == device, op,
               "Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
               device.str(), shared_device.str());
    KILN_CHECK(g.defined() && g.numel() == hidden && (g.dim() == 1 || (g.dim() == 2 && g.size(0) == 1)), op,
               "shared expert gate_weight must be [1, {}] or [{}], got {}", hidden, hidden,
               g.defined() ? g.shape_str() : "undefined");
    KILN_CHECK_KIND(is_floating(g.dtype()), Type, op, "shared expert gate_weight must be a float tensor, got {}",
                    dtype_name(g.dtype()));
    c.shared_gate = as_f32(g.reshape({hidden}));
    c.has_shared = true;
  }
  return c;
}

}  // namespace moe_detail

MoeRouting moe_route(const Tensor& router_logits, int64_t top_k, MoeScoring scoring, bool renormalize,
                     const std::optional<Tensor>& selection_bias, double routed_scaling_factor, double renorm_eps) {
  KILN_LINALG_AUTOGRAD(moe_route, router_logits, top_k, scoring, renormalize, selection_bias, routed_scaling_factor,
                       renorm_eps);
  constexpr const char* op = "moe_route";
  check_defined(router_logits, op, "router_logits");
  KILN_CHECK(router_logits.dim() == 2, op, "router_logits must be [tokens, experts], got shape {}",
             router_logits.shape_str());
  KILN_CHECK_KIND(is_activation_dtype(router_logits.dtype()), Type, op,
                  "router_logits must be float32, bfloat16 or float16, got {}", dtype_name(router_logits.dtype()));
  const int64_t T = router_logits.size(0), E = router_logits.size(1);
  KILN_CHECK_KIND(top_k >= 1 && top_k <= E, Value, op, "top_k must be in [1, {}] (the number of experts), got {}", E,
                  top_k);
  KILN_CHECK_KIND(std::isfinite(routed_scaling_factor), Value, op, "routed_scaling_factor must be finite, got {}",
                  routed_scaling_factor);
  KILN_CHECK_KIND(renorm_eps >= 0.0 && std::isfinite(renorm_eps), Value, op,
                  "renorm_eps must be finite and >= 0, got {}", renorm_eps);
  Tensor bias;
  if (selection_bias.has_value()) {
    KILN_CHECK(selection_bias->defined() && selection_bias->dim() == 1 && selection_bias->size(0) == E, op,
               "selection_bias must be [{}] (one per expert), got {}", E,
               selection_bias->defined() ? selection_bias->shape_str() : "undefined");
    KILN_CHECK_KIND(is_floating(selection_bias->dtype()), Type, op, "selection_bias must be a float tensor, got {}",
                    dtype_name(selection_bias->dtype()));
    bias = as_f32(*selection_bias);
  }
  const Device device = common_device(op, {&router_logits, bias.defined() ? &bias : nullptr});
  MoeRouting r{Tensor::empty({T, top_k}, DType::Float32, device, op),
               Tensor::empty({T, top_k}, DType::Int32, device, op)};
  if (T == 0) return r;
  const Tensor logits = as_f32(router_logits);
  backend::MoeRouteArgs a;
  a.logits = logits.data<float>();
  a.tokens = T;
  a.experts = E;
  a.top_k = top_k;
  a.sigmoid = scoring == MoeScoring::Sigmoid;
  a.selection_bias = bias.defined() ? bias.data<float>() : nullptr;
  a.renormalize = renormalize;
  a.renorm_eps = renorm_eps;
  a.scaling = routed_scaling_factor;
  a.weights = r.weights.data<float>();
  a.ids = r.ids.data<int32_t>();
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&logits, &r.weights, &r.ids}), 0}; });
  backend::moe_kernels.on(logits.device(), op).route(current_context(), a);
  return r;
}

namespace {

// Weights of every expert the routing selected (each read once) and of the shared
// expert, plus the activations in and out; 2 FLOPs per weight per token it serves.
// Ids on a device are not read back for this: every slot counts as a distinct expert.
OpCost moe_experts_cost(const backend::MoeExpertsArgs& a, const Tensor& x, const Tensor& out, bool ids_on_host) {
  const double weight_bytes = static_cast<double>(itemsize(a.weight_dtype));
  const double per_expert = 3.0 * static_cast<double>(a.hidden) * weight_bytes;  // gate, up, down
  std::vector<bool> used(static_cast<size_t>(a.num_experts), false);
  const int64_t slots = a.tokens * a.top_k;
  double inter_used = 0;
  const auto expert_of = [&](int64_t i) { return ids_on_host ? a.ids[i] : i % a.num_experts; };
  for (int64_t i = 0; i < slots; ++i) used[static_cast<size_t>(expert_of(i))] = true;
  OpCost c{tensor_bytes({&x, &out}), 0};
  for (int64_t e = 0; e < a.num_experts; ++e) {
    if (used[static_cast<size_t>(e)]) c.bytes += per_expert * static_cast<double>(a.experts[e].inter);
  }
  for (int64_t i = 0; i < slots; ++i) inter_used += static_cast<double>(a.experts[expert_of(i)].inter);
  c.flops = 2.0 * 3.0 * static_cast<double>(a.hidden) * inter_used;
  if (a.shared != nullptr) {
    const double shared = 3.0 * static_cast<double>(a.hidden) * static_cast<double>(a.shared->inter);
    c.bytes += shared * weight_bytes;
    c.flops += 2.0 * shared * static_cast<double>(a.tokens);
  }
  return c;
}

}  // namespace

MoePermutation moe_permute(const Tensor& ids, int64_t num_experts) {
  constexpr const char* op = "moe_permute";
  check_defined(ids, op, "ids");
  KILN_CHECK(ids.dim() == 2, op, "ids must be [tokens, top_k], got shape {}", ids.shape_str());
  KILN_CHECK_KIND(ids.dtype() == DType::Int32 || ids.dtype() == DType::Int64, Type, op,
                  "ids must be int32 or int64, got {}", dtype_name(ids.dtype()));
  KILN_CHECK_KIND(num_experts >= 1, Value, op, "num_experts must be >= 1, got {}", num_experts);
  const Tensor id = ids.to(DType::Int64).contiguous();
  const int64_t slots = id.numel();
  MoePermutation p{Tensor::empty({slots}, DType::Int64, kCPU, op), Tensor::empty({slots}, DType::Int64, kCPU, op),
                   Tensor::empty({num_experts}, DType::Int32, kCPU, op)};
  backend::MoePermuteArgs a;
  a.ids = id.data<int64_t>();
  a.slots = slots;
  a.top_k = ids.size(1);
  a.num_experts = num_experts;
  a.token_index = p.token_index.data<int64_t>();
  a.slot = p.slot.data<int64_t>();
  a.offs = p.offs.data<int32_t>();
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&id, &p.token_index, &p.slot, &p.offs}), 0}; });
  backend::moe_kernels.on(id.device(), op).permute(current_context(), a);
  return p;
}

MoeExperts MoeExperts::from_fused(const Tensor& gate_up, const Tensor& down, const std::optional<Tensor>& gate_up_scale,
                                  const std::optional<Tensor>& down_scale) {
  constexpr const char* op = "MoeExperts.from_fused";
  check_defined(gate_up, op, "gate_up");
  check_defined(down, op, "down");
  KILN_CHECK(gate_up.dim() == 3 && gate_up.size(1) % 2 == 0, op,
             "gate_up must be [experts, 2 * inter, hidden], got shape {}", gate_up.shape_str());
  const int64_t E = gate_up.size(0), I = gate_up.size(1) / 2, H = gate_up.size(2);
  KILN_CHECK(down.dim() == 3 && down.size(0) == E && down.size(1) == H && down.size(2) == I, op,
             "down must be [{}, {}, {}] for gate_up {}, got {}", E, H, I, gate_up.shape_str(), down.shape_str());
  KILN_CHECK(gate_up_scale.has_value() == down_scale.has_value(), op,
             "pass both gate_up_scale and down_scale, or neither");
  const bool block = gate_up_scale.has_value() && gate_up_scale->dim() == 3;
  if (gate_up_scale.has_value()) {
    KILN_CHECK(gate_up_scale->dim() >= 2 && gate_up_scale->size(0) == E && down_scale->dim() == gate_up_scale->dim() &&
                   down_scale->size(0) == E,
               op, "scales must be [{}, rows] (per row) or [{}, row blocks, column blocks], got {} and {}", E, E,
               gate_up_scale->shape_str(), down_scale->shape_str());
    KILN_CHECK(!block || I % kFp8ScaleBlock == 0, op,
               "128x128 block scales need the gate/up split (inter = {}) on a block boundary", I);
    // The gate and up halves of the scales are cut at `split` below; the rest of their
    // shape is checked against the weights by moe_experts.
    const int64_t split = block ? I / kFp8ScaleBlock : I;
    KILN_CHECK(gate_up_scale->size(1) == 2 * split, op,
               "gate_up_scale must have {} rows for gate_up {} ({} per projection, {}), got shape {}", 2 * split,
               gate_up.shape_str(), split, block ? "one per 128-row block" : "one per row",
               gate_up_scale->shape_str());
  }
  MoeExperts experts;
  for (int64_t e = 0; e < E; ++e) {
    SwigluWeights w;
    const Tensor gu = gate_up.select(0, e);
    w.gate = gu.narrow(0, 0, I);
    w.up = gu.narrow(0, I, I);
    w.down = down.select(0, e);
    if (gate_up_scale.has_value()) {
      const Tensor s = gate_up_scale->select(0, e);
      const int64_t split = block ? I / kFp8ScaleBlock : I;
      w.gate_scale = s.narrow(0, 0, split);
      w.up_scale = s.narrow(0, split, s.size(0) - split);
      w.down_scale = down_scale->select(0, e);
    }
    experts.experts.push_back(std::move(w));
  }
  return experts;
}

Tensor moe_experts(const Tensor& x, const Tensor& weights, const Tensor& ids, const MoeExperts& experts,
                   const std::optional<SharedExpert>& shared) {
  KILN_AUTOGRAD(moe_experts, x, weights, ids, experts, shared);
  constexpr const char* op = "moe_experts";
  check_defined(x, op, "x");
  KILN_CHECK(x.dim() == 2, op, "x must be [tokens, hidden], got shape {}", x.shape_str());
  KILN_CHECK_KIND(is_activation_dtype(x.dtype()), Type, op, "x must be float32, bfloat16 or float16, got {}",
                  dtype_name(x.dtype()));
  KILN_CHECK(!experts.experts.empty(), op, "no experts given");
  const int64_t T = x.size(0), H = x.size(1), E = static_cast<int64_t>(experts.experts.size());
  const Device device = common_device(op, {&x, &weights, &ids});
  moe_detail::CheckedExperts checked = moe_detail::check_experts(op, experts, shared, H, device);
  const CheckedRouting routing = check_routing(op, weights, ids, T, E);
  Tensor out = Tensor::empty({T, H}, x.dtype(), device, op);
  if (T == 0 || H == 0) return out;
  const Tensor xc = x.contiguous();

  backend::MoeExpertsArgs a;
  if (checked.has_shared) {
    a.shared = &checked.shared_expert;
    a.shared_gate = checked.shared_gate.data<float>();
  }
  const DType wdtype = checked.weight_dtype;
  const backend::Fp8ScaleLayout layout = checked.layout;
  const std::vector<backend::SwigluExpert>& list = checked.list;
  a.weight_dtype = wdtype;
  a.scale_layout = layout;
  a.hidden = H;
  a.experts = list.data();
  a.num_experts = E;
  a.tokens = T;
  a.top_k = ids.size(1);
  a.ids = routing.ids.data<int32_t>();
  a.weights = routing.weights.data<float>();
  a.act_dtype = x.dtype();
  a.x = xc.data_ptr();
  a.out = out.data_ptr();
  const bool ids_on_host = routing.ids.device().type == DeviceType::CPU;
  const OpProfile profile(op, [&] { return moe_experts_cost(a, xc, out, ids_on_host); });
  backend::moe_kernels.on(xc.device(), op).experts(current_context(), a);
  return out;
}

}  // namespace kiln
