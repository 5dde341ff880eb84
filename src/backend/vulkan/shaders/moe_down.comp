// The second half of the fused expert block: output rows [4 g, 4 g + 4) of token t,
//   out[t] = sum over t's slots s of down_{ids[s]} h[s]  (+ shared_down h[shared slot t])
// accumulated in float32 and stored once in the activation dtype, as the CPU kernel
// does. h (moe_gate_up.comp) already carries the routing weights. Work group (g, t)
// reads the 4 down rows of each of t's experts once, coalesced.
#version 450
#include "common.glsl"
#include "moe_common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint W_DT = DT_F32;
layout(constant_id = 1) const uint ACT_DT = DT_F32;
layout(constant_id = 2) const uint SCALES = MOE_NO_SCALES;
layout(constant_id = 3) const uint HAS_SHARED = 0;
// Weights per 32-bit word read, as in moe_gate_up.comp (the host checks the alignment of
// both the routed and the shared down matrices).
layout(constant_id = 4) const uint VEC = 1;

KILN_BUFFER(0, out_, writeonly)
KILN_BUFFER(1, h_, readonly)
KILN_BUFFER(2, ids_, readonly)
KILN_BUFFER(3, d_, readonly)
KILN_BUFFER(4, ds_, readonly)
KILN_BUFFER(5, sd_, readonly)
KILN_BUFFER(6, sds_, readonly)
KILN_LOAD_FLOAT(d_)
KILN_LOAD_FLOAT(sd_)
KILN_STORE_FLOAT(out_)

layout(push_constant, std430) uniform Push {
  uint tokens;
  uint top_k;
  uint experts;
  uint hidden;
  uint inter;
  uint shared_inter;
  uint d_row_stride;
  uint d_expert_stride;
  uint ds_expert_stride;
  uint sd_row_stride;
  uint k_blocks;         // ceil(inter / 128)
  uint shared_k_blocks;  // ceil(shared_inter / 128)
  uint h_stride;
  uint out_first;
  uint h_first;
  uint ids_first;
  uint d_first;
  uint ds_first;
  uint sd_first;
  uint sds_first;
} pc;

float scale_of(bool is_shared, uint i) { return uintBitsToFloat(is_shared ? sds_32[i] : ds_32[i]); }
float weight_of(bool is_shared, uint i) { return is_shared ? load_sd_(W_DT, i) : load_d_(W_DT, i); }
uint word_of(bool is_shared, uint i) { return is_shared ? sd_32[i] : d_32[i]; }

// This invocation's share of rows [r0, r0 + rows) of one expert's down matrix against
// h row `h_row` (K columns), with the expert's scales applied.
vec4 expert_rows(bool is_shared, uint w_row, uint row_stride, uint scales, uint k_blocks, uint K, uint h_row, uint r0,
                 uint rows, uint lane) {
  vec4 acc = vec4(0.0);
  const uint block_row = scales + (r0 / 128u) * k_blocks;
  if (VEC > 1u) {
    for (uint w = lane; w < K / VEC; w += MOE_LOCAL) {
      const uint k = w * VEC;
      const float scale = SCALES == MOE_BLOCK_SCALES ? scale_of(is_shared, block_row + k / 128u) : 1.0;
      uvec4 words = uvec4(0u);
      [[unroll]] for (uint r = 0u; r < MOE_ROWS; ++r) {
        if (r < rows) words[r] = word_of(is_shared, (w_row + r * row_stride) / VEC + w);
      }
      [[unroll]] for (uint v = 0u; v < VEC; ++v) {
        const float hv = uintBitsToFloat(h_32[h_row + k + v]) * scale;
        [[unroll]] for (uint r = 0u; r < MOE_ROWS; ++r) acc[r] += hv * word_element(W_DT, words[r], v);
      }
    }
  } else {
    for (uint k = lane, block = 0u; k < K; k += MOE_LOCAL, ++block) {
      float hv = uintBitsToFloat(h_32[h_row + k]);
      if (SCALES == MOE_BLOCK_SCALES) hv *= scale_of(is_shared, block_row + block);
      [[unroll]] for (uint r = 0u; r < MOE_ROWS; ++r) {
        if (r < rows) acc[r] += hv * weight_of(is_shared, w_row + r * row_stride + k);
      }
    }
  }
  if (SCALES == MOE_ROW_SCALES) {
    [[unroll]] for (uint r = 0u; r < MOE_ROWS; ++r) {
      if (r < rows) acc[r] *= scale_of(is_shared, scales + r0 + r);
    }
  }
  return acc;
}

void main() {
  const uint r0 = gl_WorkGroupID.x * MOE_ROWS;
  if (r0 >= pc.hidden) return;
  const uint lane = gl_LocalInvocationID.x;
  const uint rows = min(MOE_ROWS, pc.hidden - r0);
  for (uint t = gl_WorkGroupID.y; t < pc.tokens; t += gl_NumWorkGroups.y) {
    vec4 acc = vec4(0.0);
    bool bad = false;
    for (uint j = 0u; j < pc.top_k; ++j) {
      const uint s = t * pc.top_k + j;
      const uint e = ids_32[pc.ids_first + s];
      if (e >= pc.experts) {
        bad = true;
        continue;
      }
      acc += expert_rows(false, pc.d_first + e * pc.d_expert_stride + r0 * pc.d_row_stride, pc.d_row_stride,
                         pc.ds_first + e * pc.ds_expert_stride, pc.k_blocks, pc.inter,
                         pc.h_first + s * pc.h_stride, r0, rows, lane);
    }
    if (HAS_SHARED != 0u) {
      const uint s = pc.tokens * pc.top_k + t;
      acc += expert_rows(true, pc.sd_first + r0 * pc.sd_row_stride, pc.sd_row_stride, pc.sds_first,
                         pc.shared_k_blocks, pc.shared_inter, pc.h_first + s * pc.h_stride, r0, rows, lane);
    }
    acc = group_sum4(acc);
    if (lane < rows) store_out_(ACT_DT, pc.out_first + t * pc.hidden + r0 + lane, bad ? MOE_NAN : acc[lane]);
  }
}
