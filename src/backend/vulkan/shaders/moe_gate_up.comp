// The first half of the fused expert block (backend/moe.h MoeExpertsArgs): for each
// (token, choice) slot s routed to expert e = ids[s], rows [4 g, 4 g + 4) of
//   h[s] = weight[s] * silu(gate_e x_t) * up_e x_t        (float32)
// Work group (g, s): the 4 gate and 4 up rows are read once against one read of x_t.
// SHARED: the shared expert (expert 0 of the bound matrices) for token s, weight[s] its
// sigmoid gate. An id outside [0, E) fills the slot's row with NaN (the host cannot
// check ids the device wrote without waiting), which moe_down carries to the output.
// The routing weight is applied here rather than after the down projection: the same
// product, rounded in another order.
#version 450
#include "common.glsl"
#include "moe_common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint W_DT = DT_F32;
layout(constant_id = 1) const uint ACT_DT = DT_F32;
layout(constant_id = 2) const uint SCALES = MOE_NO_SCALES;
layout(constant_id = 3) const uint SHARED = 0;
// Weights per 32-bit word read (1: one element per read; 2 or 4 when every row start is
// word-aligned and hidden a multiple of it, as the host checks).
layout(constant_id = 4) const uint VEC = 1;

KILN_BUFFER(0, h_, writeonly)
KILN_BUFFER(1, x_, readonly)
KILN_BUFFER(2, ids_, readonly)
KILN_BUFFER(3, rw_, readonly)
KILN_BUFFER(4, g_, readonly)
KILN_BUFFER(5, u_, readonly)
KILN_BUFFER(6, gs_, readonly)
KILN_BUFFER(7, us_, readonly)
KILN_LOAD_FLOAT(x_)
KILN_LOAD_FLOAT(g_)
KILN_LOAD_FLOAT(u_)

layout(push_constant, std430) uniform Push {
  uint slots;
  uint top_k;
  uint experts;
  uint inter;
  uint hidden;
  uint g_row_stride;
  uint u_row_stride;
  uint g_expert_stride;
  uint u_expert_stride;
  uint gs_expert_stride;
  uint us_expert_stride;
  uint k_blocks;  // ceil(hidden / 128)
  uint h_stride;
  uint h_row0;  // h row of slot 0
  uint h_first;
  uint x_first;
  uint ids_first;
  uint rw_first;
  uint g_first;
  uint u_first;
  uint gs_first;
  uint us_first;
} pc;

float gate_scale(uint i) { return uintBitsToFloat(gs_32[i]); }
float up_scale(uint i) { return uintBitsToFloat(us_32[i]); }

void main() {
  const uint i0 = gl_WorkGroupID.x * MOE_ROWS;
  if (i0 >= pc.inter) return;
  const uint lane = gl_LocalInvocationID.x;
  const uint H = pc.hidden;
  for (uint s = gl_WorkGroupID.y; s < pc.slots; s += gl_NumWorkGroups.y) {
    const uint t = SHARED != 0u ? s : s / pc.top_k;
    const uint e = SHARED != 0u ? 0u : ids_32[pc.ids_first + s];  // int32: negative ids wrap above E
    const uint h_row = pc.h_first + (pc.h_row0 + s) * pc.h_stride;
    if (e >= pc.experts) {
      if (lane < MOE_ROWS && i0 + lane < pc.inter) h_32[h_row + i0 + lane] = floatBitsToUint(MOE_NAN);
      continue;
    }
    const uint x_row = pc.x_first + t * H;
    const uint g_row = pc.g_first + e * pc.g_expert_stride + i0 * pc.g_row_stride;
    const uint u_row = pc.u_first + e * pc.u_expert_stride + i0 * pc.u_row_stride;
    const uint rows = min(MOE_ROWS, pc.inter - i0);
    // All 4 rows lie in one 128-row scale block (i0 is a multiple of 4).
    const uint gs_block = pc.gs_first + e * pc.gs_expert_stride + (i0 / 128u) * pc.k_blocks;
    const uint us_block = pc.us_first + e * pc.us_expert_stride + (i0 / 128u) * pc.k_blocks;
    vec4 gate = vec4(0.0), up = vec4(0.0);
    if (VEC > 1u) {
      for (uint w = lane; w < H / VEC; w += MOE_LOCAL) {
        const uint k = w * VEC;
        float g_scale = 1.0, u_scale = 1.0;
        if (SCALES == MOE_BLOCK_SCALES) {
          g_scale = gate_scale(gs_block + k / 128u);  // a word never straddles a block
          u_scale = up_scale(us_block + k / 128u);
        }
        uvec4 gw = uvec4(0u), uw = uvec4(0u);
        [[unroll]] for (uint r = 0u; r < MOE_ROWS; ++r) {
          if (r < rows) {
            gw[r] = g_32[(g_row + r * pc.g_row_stride) / VEC + w];
            uw[r] = u_32[(u_row + r * pc.u_row_stride) / VEC + w];
          }
        }
        [[unroll]] for (uint v = 0u; v < VEC; ++v) {
          const float xv = load_x_(ACT_DT, x_row + k + v);
          [[unroll]] for (uint r = 0u; r < MOE_ROWS; ++r) {
            gate[r] += xv * g_scale * word_element(W_DT, gw[r], v);
            up[r] += xv * u_scale * word_element(W_DT, uw[r], v);
          }
        }
      }
    } else {
      for (uint k = lane, block = 0u; k < H; k += MOE_LOCAL, ++block) {
        const float xv = load_x_(ACT_DT, x_row + k);
        float gx = xv, ux = xv;
        if (SCALES == MOE_BLOCK_SCALES) {
          gx *= gate_scale(gs_block + block);
          ux *= up_scale(us_block + block);
        }
        [[unroll]] for (uint r = 0u; r < MOE_ROWS; ++r) {
          if (r < rows) {
            gate[r] += gx * load_g_(W_DT, g_row + r * pc.g_row_stride + k);
            up[r] += ux * load_u_(W_DT, u_row + r * pc.u_row_stride + k);
          }
        }
      }
    }
    gate = group_sum4(gate);
    up = group_sum4(up);
    if (lane < rows) {
      const uint i = i0 + lane;
      float g = gate[lane], u = up[lane];
      if (SCALES == MOE_ROW_SCALES) {
        g *= gate_scale(pc.gs_first + e * pc.gs_expert_stride + i);
        u *= up_scale(pc.us_first + e * pc.us_expert_stride + i);
      }
      const float w = uintBitsToFloat(rw_32[pc.rw_first + s]);
      h_32[h_row + i] = floatBitsToUint(w * (moe_silu(g) * u));
    }
  }
}
