// The Vulkan moe_route kernel (shaders/moe_route.comp): one work group per token picks
// its top k on the device and writes ids and weights there, so routing never waits for
// the host.
#include "backend/vulkan/moe/moe_vulkan.h"

#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::vulkan {

void moe_route(const ExecutionContext&, const backend::MoeRouteArgs& a) {
  const char* op = "moe_route";
  int64_t slots = 0, logits = 0;
  KILN_CHECK(checked_mul(a.tokens, a.top_k, &slots) && checked_mul(a.tokens, a.experts, &logits), op,
             "size overflow");
  KILN_CHECK(a.experts < (int64_t{1} << 31), op, "the Vulkan kernel takes up to 2^31 - 1 experts, got {}", a.experts);
  if (a.tokens == 0) return;
  const Binding w = bind_raw(a.weights, DType::Float32, slots, op);
  const Binding ids = bind_raw(a.ids, DType::Int32, slots, op);
  const Binding l = bind_raw(a.logits, DType::Float32, logits, op);
  const Binding b = a.selection_bias != nullptr ? bind_raw(a.selection_bias, DType::Float32, a.experts, op) : l;
  struct {
    uint32_t tokens, experts, top_k, w_first, ids_first, l_first, b_first;
    float renorm_eps, scaling;
  } push{static_cast<uint32_t>(a.tokens),
         static_cast<uint32_t>(a.experts),
         static_cast<uint32_t>(a.top_k),
         w.first,
         ids.first,
         l.first,
         b.first,
         static_cast<float>(a.renorm_eps),
         static_cast<float>(a.scaling)};
  const uint32_t spec[] = {a.sigmoid ? 1u : 0u, a.selection_bias != nullptr ? 1u : 0u, a.renormalize ? 1u : 0u};
  const auto grid = grid_for(a.tokens, 1, op);
  dispatch(op, "moe_route", spec, {w, ids, l, b}, &push, sizeof(push), grid[0], grid[1]);
}

}  // namespace kiln::vulkan
