// The Vulkan moe_experts kernel: three dispatches recorded back to back, no host wait.
//   moe_shared_gate (with a shared expert): its sigmoid weight per token;
//   moe_gate_up: h[slot] = weight * silu(gate x) * up x for every routed slot (and each
//     token's shared-expert slot), ids read on the device;
//   moe_down: out[t] = sum of down h over t's slots, rounded to x's dtype once.
// The expert matrices of one projection are bound as one storage buffer, so every
// expert the device may pick is reachable without the host knowing which: they must
// lie in one device tensor at a constant stride (a stacked [E, rows, cols] tensor or
// MoeExperts::from_fused views). Decode first: work is split by (slot, 4 rows), so an
// expert chosen by several tokens of one call is read once per token (from the cache on
// a GPU); the CPU's per-expert tiling for prefill is not ported.
#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "backend/vulkan/moe/moe_vulkan.h"
#include "backend/vulkan/vk_kernels.h"
#include "backend/vulkan/vk_memory.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/tensor.h"

namespace kiln::vulkan {
namespace {

constexpr const char* kOp = "moe_experts";
constexpr int64_t kRowsPerGroup = 4;        // MOE_ROWS in shaders/moe_common.glsl
constexpr int64_t kMaxGroups = 65535;       // the per-dimension work-group count every device offers
constexpr int64_t kMax32 = (int64_t{1} << 31) - 1;

// One projection (or its scales) of every expert as the shaders see it: expert e's
// element (r, c) at binding.first + e * expert_stride + r * row_stride + c.
struct Stacked {
  Binding binding;
  uint32_t expert_stride = 0;
  uint32_t row_stride = 0;
};

// `first` and the pointers of the other experts (`pointer_of(e)`), `per_expert` elements
// reached from each; refused unless they are one buffer at a constant stride.
template <class PointerOf>
Stacked stacked(const char* what, int64_t experts, PointerOf pointer_of, DType dtype, int64_t per_expert,
                int64_t row_stride) {
  const auto* base = static_cast<const char*>(pointer_of(0));
  const auto item = static_cast<int64_t>(itemsize(dtype));
  const int64_t stride_bytes = experts > 1 ? static_cast<const char*>(pointer_of(1)) - base : 0;
  bool constant = stride_bytes >= 0 && stride_bytes % item == 0;
  for (int64_t e = 2; constant && e < experts; ++e) {
    constant = static_cast<const char*>(pointer_of(e)) - base == e * stride_bytes;
  }
  KILN_CHECK_KIND(constant, NotImplemented, kOp,
                  "the Vulkan kernel needs every expert's {} in one device tensor at a constant stride (a stacked "
                  "[experts, rows, cols] tensor, or MoeExperts::from_fused views), got another layout",
                  what);
  const int64_t stride = stride_bytes / item;
  int64_t extent = 0, bytes = 0;
  if (per_expert > 0) {
    KILN_CHECK(checked_mul(experts - 1, stride, &extent) && checked_add(extent, per_expert, &extent) &&
                   checked_mul(extent, item, &bytes),
               kOp, "size overflow");
    // The whole range must be one buffer: the chunk of its first byte reaches its last.
    KILN_CHECK(device_pool().resolve(base, kOp).bytes_to_end >= static_cast<uint64_t>(bytes), kOp,
               "the {} of the experts do not lie in one device allocation", what);
  }
  KILN_CHECK(stride <= kMax32 && row_stride <= kMax32, kOp, "expert strides past 2^31 elements are not supported");
  return {bind_raw(per_expert > 0 ? base : nullptr, dtype, extent, kOp), static_cast<uint32_t>(stride),
          static_cast<uint32_t>(row_stride)};
}

// Elements one [rows, cols] matrix with `row_stride` reaches (0 when empty).
int64_t matrix_extent(int64_t rows, int64_t cols, int64_t row_stride) {
  if (rows == 0 || cols == 0) return 0;
  int64_t n = 0;
  KILN_CHECK(checked_mul(rows - 1, row_stride, &n) && checked_add(n, cols, &n), kOp, "size overflow");
  return n;
}

int64_t scale_count(backend::Fp8ScaleLayout layout, int64_t rows, int64_t cols) {
  if (layout == backend::Fp8ScaleLayout::PerRow) return rows;
  return ceil_div(rows, kFp8ScaleBlock) * ceil_div(cols, kFp8ScaleBlock);
}

// The matrices (and scales) of one projection over `count` experts starting at `list`.
struct Projection {
  Stacked weights, scales;
};

Projection projection(const char* what, const backend::MoeExpertsArgs& a, const backend::SwigluExpert* list,
                      int64_t count, backend::ExpertMatrix backend::SwigluExpert::*which, int64_t rows,
                      int64_t cols) {
  const backend::ExpertMatrix& m0 = list[0].*which;
  Projection p;
  p.weights = stacked(
      what, count, [&](int64_t e) { return (list[e].*which).data; }, a.weight_dtype,
      matrix_extent(rows, cols, m0.row_stride), m0.row_stride);
  if (a.weight_dtype == DType::Float8_e4m3fn) {
    p.scales = stacked(
        what, count, [&](int64_t e) -> const void* { return (list[e].*which).scale; }, DType::Float32,
        rows == 0 || cols == 0 ? 0 : scale_count(a.scale_layout, rows, cols), 0);
  } else {
    p.scales.binding = p.weights.binding;  // unread
  }
  return p;
}

uint32_t scale_code(const backend::MoeExpertsArgs& a) {
  if (a.weight_dtype != DType::Float8_e4m3fn) return 0;
  return a.scale_layout == backend::Fp8ScaleLayout::PerRow ? 1 : 2;
}

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// Weights per 32-bit word the shaders may read (VEC): a word holds 4 / itemsize elements,
// usable when the row length and every row start (first element, row and expert strides)
// are multiples of it. Otherwise 1: one element per read.
uint32_t vector_width(DType weights, std::initializer_list<int64_t> multiples) {
  const int64_t per_word = 4 / static_cast<int64_t>(itemsize(weights));
  for (int64_t m : multiples) {
    if (m % per_word != 0) return 1;
  }
  return static_cast<uint32_t>(per_word);
}

struct GateUpPush {
  uint32_t slots, top_k, experts, inter, hidden, g_row_stride, u_row_stride, g_expert_stride, u_expert_stride,
      gs_expert_stride, us_expert_stride, k_blocks, h_stride, h_row0, h_first, x_first, ids_first, rw_first, g_first,
      u_first, gs_first, us_first;
};

// moe_gate_up.comp over `slots` slots of `count` experts (shared: the one shared expert).
void gate_up(const backend::MoeExpertsArgs& a, const backend::SwigluExpert* list, int64_t count, bool shared,
             int64_t slots, int64_t h_row0, const Binding& h, int64_t h_stride, const Binding& x, const Binding& ids,
             const Binding& routing_weights) {
  const int64_t I = list[0].inter, H = a.hidden;
  if (I == 0 || slots == 0) return;
  const Projection g = projection("gate", a, list, count, &backend::SwigluExpert::gate, I, H);
  const Projection u = projection("up", a, list, count, &backend::SwigluExpert::up, I, H);
  const GateUpPush push{u32(slots),
                        u32(a.top_k),
                        u32(count),
                        u32(I),
                        u32(H),
                        g.weights.row_stride,
                        u.weights.row_stride,
                        g.weights.expert_stride,
                        u.weights.expert_stride,
                        g.scales.expert_stride,
                        u.scales.expert_stride,
                        u32(ceil_div(H, kFp8ScaleBlock)),
                        u32(h_stride),
                        u32(h_row0),
                        h.first,
                        x.first,
                        ids.first,
                        routing_weights.first,
                        g.weights.binding.first,
                        u.weights.binding.first,
                        g.scales.binding.first,
                        u.scales.binding.first};
  const uint32_t vec = vector_width(a.weight_dtype, {H, g.weights.row_stride, u.weights.row_stride,
                                                     g.weights.expert_stride, u.weights.expert_stride,
                                                     g.weights.binding.first, u.weights.binding.first});
  const uint32_t spec[] = {dtype_code(a.weight_dtype), dtype_code(a.act_dtype), scale_code(a), shared ? 1u : 0u, vec};
  dispatch(kOp, "moe_gate_up", spec,
           {h, x, ids, routing_weights, g.weights.binding, u.weights.binding, g.scales.binding, u.scales.binding},
           &push, sizeof(push), u32(ceil_div(I, kRowsPerGroup)), u32(std::min(slots, kMaxGroups)));
}

}  // namespace

void moe_experts(const ExecutionContext&, const backend::MoeExpertsArgs& a) {
  const DType w = a.weight_dtype;
  KILN_CHECK_KIND(w == DType::Float32 || w == DType::Float16 || w == DType::BFloat16 || w == DType::Float8_e4m3fn,
                  NotImplemented, kOp, "{} expert weights have no Vulkan kernel", dtype_name(w));
  const int64_t T = a.tokens, H = a.hidden, E = a.num_experts, k = a.top_k;
  const int64_t I = a.experts[0].inter, shared_I = a.shared != nullptr ? a.shared->inter : 0;
  if (T == 0 || H == 0) return;
  int64_t slots = 0, h_rows = 0, x_elements = 0, h_elements = 0;
  const int64_t h_stride = std::max<int64_t>({I, shared_I, 1});
  KILN_CHECK(checked_mul(T, k, &slots) && checked_add(slots, a.shared != nullptr ? T : 0, &h_rows) &&
                 checked_mul(T, H, &x_elements) && checked_mul(h_rows, h_stride, &h_elements),
             kOp, "size overflow");
  KILN_CHECK(ceil_div(std::max(h_stride, H), kRowsPerGroup) <= kMaxGroups && E <= kMax32, kOp,
             "the Vulkan kernel takes hidden and intermediate sizes up to {}, got {} and {}",
             kMaxGroups * kRowsPerGroup, H, h_stride);

  // Scratch on the calling stream: freed blocks are reused only after this stream's
  // queued work, so dropping the tensors here is safe (vk_memory.h).
  const Tensor h = Tensor::empty({h_rows, h_stride}, DType::Float32, kVulkan, kOp);
  const Binding hb = bind(h, kOp);
  const Binding x = bind_raw(a.x, a.act_dtype, x_elements, kOp);
  const Binding out = bind_raw(a.out, a.act_dtype, x_elements, kOp);
  const Binding ids = bind_raw(a.ids, DType::Int32, slots, kOp);
  const Binding routing = bind_raw(a.weights, DType::Float32, slots, kOp);
  gate_up(a, a.experts, E, false, slots, 0, hb, h_stride, x, ids, routing);

  Projection shared_down;
  Tensor shared_weight;
  if (a.shared != nullptr) {
    shared_weight = Tensor::empty({T}, DType::Float32, kVulkan, kOp);
    const Binding sw = bind(shared_weight, kOp);
    const Binding gate = bind_raw(a.shared_gate, DType::Float32, H, kOp);
    const uint32_t push[] = {u32(T), u32(H), sw.first, x.first, gate.first};
    const uint32_t spec[] = {dtype_code(a.act_dtype)};
    const auto grid = grid_for(T, 1, kOp);
    dispatch(kOp, "moe_shared_gate", spec, {sw, x, gate}, push, sizeof(push), grid[0], grid[1]);
    gate_up(a, a.shared, 1, true, T, slots, hb, h_stride, x, ids, sw);
    shared_down = projection("shared down", a, a.shared, 1, &backend::SwigluExpert::down, H, shared_I);
  } else {
    shared_down.weights.binding = shared_down.scales.binding = hb;  // unread
  }

  const Projection down = projection("down", a, a.experts, E, &backend::SwigluExpert::down, H, I);
  struct {
    uint32_t tokens, top_k, experts, hidden, inter, shared_inter, d_row_stride, d_expert_stride, ds_expert_stride,
        sd_row_stride, k_blocks, shared_k_blocks, h_stride, out_first, h_first, ids_first, d_first, ds_first, sd_first,
        sds_first;
  } push{u32(T),
         u32(k),
         u32(E),
         u32(H),
         u32(I),
         u32(shared_I),
         down.weights.row_stride,
         down.weights.expert_stride,
         down.scales.expert_stride,
         shared_down.weights.row_stride,
         u32(ceil_div(I, kFp8ScaleBlock)),
         u32(ceil_div(shared_I, kFp8ScaleBlock)),
         u32(h_stride),
         out.first,
         hb.first,
         ids.first,
         down.weights.binding.first,
         down.scales.binding.first,
         shared_down.weights.binding.first,
         shared_down.scales.binding.first};
  const uint32_t vec = vector_width(w, {I, shared_I, down.weights.row_stride, down.weights.expert_stride,
                                        down.weights.binding.first, shared_down.weights.row_stride,
                                        a.shared != nullptr ? shared_down.weights.binding.first : 0});
  const uint32_t spec[] = {dtype_code(w), dtype_code(a.act_dtype), scale_code(a), a.shared != nullptr ? 1u : 0u, vec};
  dispatch(kOp, "moe_down", spec,
           {out, hb, ids, down.weights.binding, down.scales.binding, shared_down.weights.binding,
            shared_down.scales.binding},
           &push, sizeof(push), u32(ceil_div(H, kRowsPerGroup)), u32(std::min(T, kMaxGroups)));
}

}  // namespace kiln::vulkan
