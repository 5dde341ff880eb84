// Scaled dot-product attention (backend/attention.h) in float32 over float32, float16 or
// bfloat16 q, k, v: one work group of 128 invocations per (row, query), an online
// softmax over tiles of 128 keys, so no score matrix is ever stored. Per tile,
// invocation t scores key j0 + t against the query (held scaled in shared memory, as
// the CPU kernels fold the scale into q), adds the bias or hides the key (causal,
// top-left: query i sees keys 0..i), the group takes the tile's max and sum, and then
// every invocation accumulates its own output dims (t, t + 128, ...) over the tile's
// keys: each V row is read once per tile, coalesced. Rows (batch, query head) find their
// operands through a table of element offsets (q, k, v, bias per row), so broadcast
// batches and grouped-query heads cost nothing here. A row whose every key is hidden
// comes out as zeros, and NaN or +inf scores give a NaN row, as on the CPU.
//
// SPLIT (decode over a long context, where (row, query) pairs alone are too few work
// groups to fill a GPU): the keys are cut into chunks of chunk_keys, a work group per
// (row, query, chunk) leaves its running max, sum and unnormalised accumulator in
// `part`, and attention_merge.comp combines the chunks.
#version 450
#include "common.glsl"
#include "reduce.glsl"

#define LOCAL 128u
// Head dims up to MAX_DIM (q and k) and LOCAL * ACC_PER_THREAD (v).
#define MAX_DIM 1024u
#define ACC_PER_THREAD 8u

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT = DT_F32;
layout(constant_id = 1) const uint HAS_BIAS = 0;
layout(constant_id = 2) const uint CAUSAL = 0;
layout(constant_id = 3) const uint SPLIT = 0;

KILN_BUFFER(0, out_, writeonly)
KILN_BUFFER(1, q_, readonly)
KILN_BUFFER(2, k_, readonly)
KILN_BUFFER(3, v_, readonly)
KILN_BUFFER(4, bias_, readonly)
KILN_BUFFER(5, off_, readonly)
// SPLIT: float32 [rows * L * chunks][2 + Ev] = max, sum, accumulator per chunk.
layout(binding = 6, std430) writeonly buffer Part { float part[]; };
KILN_LOAD_FLOAT(q_)
KILN_LOAD_FLOAT(k_)
KILN_LOAD_FLOAT(v_)
KILN_LOAD_FLOAT(bias_)
KILN_STORE_FLOAT(out_)

layout(push_constant, std430) uniform Push {
  uint rows;
  uint L;
  uint S;
  uint E;
  uint Ev;
  uint q_stride_l;
  uint k_stride_s;
  uint v_stride_s;
  uint bias_stride_l;
  uint bias_stride_s;
  uint out_first;
  uint q_first;
  uint k_first;
  uint v_first;
  uint bias_first;
  uint off_first;  // offsets: uint32 [rows][4] = q, k, v, bias element offsets
  float scale;
  uint chunks;      // SPLIT: chunks per (row, query), else 1
  uint chunk_keys;  // SPLIT: keys per chunk (a multiple of LOCAL)
} pc;

shared float q_s[MAX_DIM];
shared float p_s[LOCAL];

void main() {
  const uint group = group_row();
  if (group >= pc.rows * pc.L * pc.chunks) return;  // whole groups only: the barriers stay uniform
  const uint item = group / pc.chunks;
  const uint chunk = group % pc.chunks;
  const uint r = item / pc.L;
  const uint i = item % pc.L;
  const uint t = gl_LocalInvocationID.x;
  const uint q_base = pc.q_first + off_32[pc.off_first + 4u * r] + i * pc.q_stride_l;
  const uint k_base = pc.k_first + off_32[pc.off_first + 4u * r + 1u];
  const uint v_base = pc.v_first + off_32[pc.off_first + 4u * r + 2u];
  const uint b_base = pc.bias_first + off_32[pc.off_first + 4u * r + 3u] + i * pc.bias_stride_l;

  for (uint e = t; e < pc.E; e += LOCAL) q_s[e] = load_q_(DT, q_base + e) * pc.scale;
  barrier();

  const float neg_inf = uintBitsToFloat(0xFF800000u);
  float m = neg_inf;  // running max of the scores seen
  float l = 0.0;      // running sum of e^(score - m)
  float acc[ACC_PER_THREAD];
  [[unroll]] for (uint c = 0u; c < ACC_PER_THREAD; ++c) acc[c] = 0.0;

  const uint visible = CAUSAL != 0u ? min(pc.S, i + 1u) : pc.S;
  const uint key_begin = SPLIT != 0u ? min(chunk * pc.chunk_keys, visible) : 0u;
  const uint key_end = SPLIT != 0u ? min(key_begin + pc.chunk_keys, visible) : visible;
  for (uint j0 = key_begin; j0 < key_end; j0 += LOCAL) {
    const uint j = j0 + t;
    float s = neg_inf;
    if (j < key_end) {
      const uint k_row = k_base + j * pc.k_stride_s;
      float dot = 0.0;
      for (uint e = 0u; e < pc.E; ++e) dot += q_s[e] * load_k_(DT, k_row + e);
      if (HAS_BIAS != 0u) dot += load_bias_(DT_F32, b_base + j * pc.bias_stride_s);
      s = dot;
    }
    const float m_new = max(m, group_max(s));
    // Nothing visible yet keeps the max at -inf; subtracting 0 then gives e^-inf = 0.
    const float m_use = m_new == neg_inf ? 0.0 : m_new;
    const float p = j < key_end ? exp(s - m_use) : 0.0;
    p_s[t] = p;
    const float alpha = exp(m - m_use);
    l = l * alpha + group_sum(p);  // group_sum's barriers also publish p_s
    const uint n = min(LOCAL, key_end - j0);
    [[unroll]] for (uint c = 0u; c < ACC_PER_THREAD; ++c) {
      const uint e = t + c * LOCAL;
      if (e >= pc.Ev) break;
      float a = acc[c] * alpha;
      for (uint jj = 0u; jj < n; ++jj) a += p_s[jj] * load_v_(DT, v_base + (j0 + jj) * pc.v_stride_s + e);
      acc[c] = a;
    }
    m = m_new;
    barrier();  // p_s is rewritten by the next tile
  }

  if (SPLIT != 0u) {
    const uint base = group * (2u + pc.Ev);
    if (t == 0u) {
      part[base] = m;
      part[base + 1u] = l;
    }
    [[unroll]] for (uint c = 0u; c < ACC_PER_THREAD; ++c) {
      const uint e = t + c * LOCAL;
      if (e >= pc.Ev) break;
      part[base + 2u + e] = acc[c];
    }
    return;
  }
  // l == 0: every key was hidden (zeros); a NaN l gives NaN, as the CPU kernels do.
  const bool hidden = l == 0.0;
  const float inv = hidden ? 0.0 : 1.0 / l;
  const uint out_row = pc.out_first + (r * pc.L + i) * pc.Ev;
  [[unroll]] for (uint c = 0u; c < ACC_PER_THREAD; ++c) {
    const uint e = t + c * LOCAL;
    if (e >= pc.Ev) break;
    store_out_(DT, out_row + e, hidden ? 0.0 : acc[c] * inv);
  }
}
