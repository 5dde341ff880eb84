// MoE routing of one token per work group (backend/moe.h MoeRouteArgs, the CPU's
// route_token): scores = softmax or sigmoid of the logits, the top k of scores + bias
// chosen on the device (k rounds of a work-group argmax: NaN first, ties to the lower
// expert id, as the CPU's partial sort), weights = the scores there, renormalised and
// scaled. The logits are read again each round instead of being kept, so any number of
// experts fits; E * k reads of a [E] row are nothing next to one expert's weights.
#version 450
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint SIGMOID = 0;
layout(constant_id = 1) const uint HAS_BIAS = 0;
layout(constant_id = 2) const uint RENORM = 0;

KILN_BUFFER(0, w_, )
KILN_BUFFER(1, ids_, writeonly)
KILN_BUFFER(2, l_, readonly)
KILN_BUFFER(3, b_, readonly)

layout(push_constant, std430) uniform Push {
  uint tokens;
  uint experts;
  uint top_k;
  uint w_first;
  uint ids_first;
  uint l_first;
  uint b_first;
  float renorm_eps;
  float scaling;
} pc;

shared uint moe_route_partials[128];

// Work-group max / min of a uint (subgroups, then their partials through shared memory).
uint group_max_uint(uint v) {
  v = subgroupMax(v);
  if (subgroupElect()) moe_route_partials[gl_SubgroupID] = v;
  barrier();
  uint r = moe_route_partials[0];
  for (uint s = 1u; s < gl_NumSubgroups; ++s) r = max(r, moe_route_partials[s]);
  barrier();
  return r;
}

uint group_min_uint(uint v) {
  v = subgroupMin(v);
  if (subgroupElect()) moe_route_partials[gl_SubgroupID] = v;
  barrier();
  uint r = moe_route_partials[0];
  for (uint s = 1u; s < gl_NumSubgroups; ++s) r = min(r, moe_route_partials[s]);
  barrier();
  return r;
}

// A float as a uint that orders as the CPU's comparison does: NaN above everything,
// -0 equal to +0. Every number maps above 0, which marks "no candidate".
uint order_key(float v) {
  uint u = floatBitsToUint(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0xFFFFFFFFu;
  if ((u & 0x7FFFFFFFu) == 0u) u = 0u;
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

float logit(uint row, uint e) { return uintBitsToFloat(l_32[row + e]); }

// The softmax of the row, as (max, 1 / sum, any NaN) so a score is one exp and a product.
float g_max;
float g_inv;
bool g_nan;

float score(uint row, uint e) {
  const float l = logit(row, e);
  if (SIGMOID != 0u) return 1.0 / (1.0 + exp(-l));
  return g_nan ? uintBitsToFloat(0x7FC00000u) : exp(l - g_max) * g_inv;
}

float select_value(uint row, uint e) {
  float v = score(row, e);
  if (HAS_BIAS != 0u) v += uintBitsToFloat(b_32[pc.b_first + e]);
  return v;
}

void main() {
  const uint t = group_row();
  if (t >= pc.tokens) return;
  const uint lane = gl_LocalInvocationID.x;
  const uint E = pc.experts;
  const uint row = pc.l_first + t * E;
  if (SIGMOID == 0u) {
    float m = uintBitsToFloat(0xFF800000u);
    uint nan = 0u;
    for (uint e = lane; e < E; e += 128u) {
      const float l = logit(row, e);
      if (isnan(l)) nan = 1u; else m = max(m, l);
    }
    g_max = group_max(m);
    g_nan = group_max_uint(nan) != 0u;
    float s = 0.0;
    for (uint e = lane; e < E; e += 128u) s += exp(logit(row, e) - g_max);
    g_inv = 1.0 / group_sum(s);
  }
  // Round r picks the best expert ranked after round r-1's pick (last_key, last_id):
  // ranks are key descending, then id ascending.
  uint last_key = 0xFFFFFFFFu;
  int last_id = -1;
  float sum = 0.0;
  const uint out_row = t * pc.top_k;
  for (uint r = 0u; r < pc.top_k; ++r) {
    uint best_key = 0u, best_id = 0xFFFFFFFFu;
    for (uint e = lane; e < E; e += 128u) {
      const uint key = order_key(select_value(row, e));
      const bool after = key < last_key || (key == last_key && int(e) > last_id);
      if (after && (key > best_key || (key == best_key && e < best_id))) {
        best_key = key;
        best_id = e;
      }
    }
    const uint top_key = group_max_uint(best_key);
    const uint top_id = group_min_uint(best_key == top_key ? best_id : 0xFFFFFFFFu);
    last_key = top_key;
    last_id = int(top_id);
    if (lane == 0u) {
      const float w = score(row, top_id);
      sum += w;
      ids_32[pc.ids_first + out_row + r] = top_id;
      w_32[pc.w_first + out_row + r] = floatBitsToUint(w);
    }
  }
  if (lane != 0u) return;
  // Invocation 0 rereads its own writes (ordered within one invocation).
  const float norm = sum + pc.renorm_eps;
  for (uint r = 0u; r < pc.top_k; ++r) {
    float w = uintBitsToFloat(w_32[pc.w_first + out_row + r]);
    if (RENORM != 0u) w /= norm;
    w_32[pc.w_first + out_row + r] = floatBitsToUint(w * pc.scaling);
  }
}
