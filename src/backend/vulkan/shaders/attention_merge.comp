// The second pass of split attention (attention.comp with SPLIT): per (row, query), the
// chunks' running max m_c, sum l_c and accumulator acc_c (relative to e^m_c) combine as
//   out = sum_c e^(m_c - M) acc_c / sum_c e^(m_c - M) l_c,   M = max_c m_c,
// the formula the CPU decode kernel merges its context slices with. A row whose every
// key was hidden (all l_c == 0) comes out as zeros; a NaN anywhere gives a NaN row.
#version 450
#include "common.glsl"

#define LOCAL 128u

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT = DT_F32;

KILN_BUFFER(0, out_, writeonly)
KILN_STORE_FLOAT(out_)
layout(binding = 1, std430) readonly buffer Part { float part[]; };

layout(push_constant, std430) uniform Push {
  uint items;  // rows * L
  uint Ev;
  uint chunks;
  uint out_first;
} pc;

void main() {
  const uint item = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (item >= pc.items) return;
  const uint t = gl_LocalInvocationID.x;
  const uint stride = 2u + pc.Ev;
  const uint first = item * pc.chunks * stride;
  const float neg_inf = uintBitsToFloat(0xFF800000u);
  float M = neg_inf;
  for (uint c = 0u; c < pc.chunks; ++c) M = max(M, part[first + c * stride]);
  const float m_use = M == neg_inf ? 0.0 : M;
  float l = 0.0;
  for (uint c = 0u; c < pc.chunks; ++c) {
    const uint b = first + c * stride;
    l += exp(part[b] - m_use) * part[b + 1u];
  }
  const bool hidden = l == 0.0;
  const float inv = hidden ? 0.0 : 1.0 / l;
  for (uint e = t; e < pc.Ev; e += LOCAL) {
    float a = 0.0;
    for (uint c = 0u; c < pc.chunks; ++c) {
      const uint b = first + c * stride;
      a += exp(part[b] - m_use) * part[b + 2u + e];
    }
    store_out_(DT, pc.out_first + item * pc.Ev + e, hidden ? 0.0 : a * inv);
  }
}
