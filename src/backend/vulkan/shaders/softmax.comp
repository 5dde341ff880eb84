// softmax / log_softmax of each row of an [outer, dim, inner] array (one work group per
// (outer, inner) pair, reading `dim` elements `inner` apart), in float32 over float32,
// float16 or bfloat16 storage (backend/softmax.h).
#version 450
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT = DT_F32;
layout(constant_id = 1) const uint LOG = 0;

KILN_BUFFER(0, out_, writeonly)
KILN_BUFFER(1, in_, readonly)
KILN_LOAD_FLOAT(in_)
KILN_STORE_FLOAT(out_)

layout(push_constant, std430) uniform Push {
  uint rows;  // outer * inner
  uint dim;
  uint inner;
  uint out_first;
  uint in_first;
} pc;

void main() {
  const uint row = group_row();
  if (row >= pc.rows) return;  // whole groups only: the barriers below stay uniform
  const uint base = (row / pc.inner) * pc.dim * pc.inner + row % pc.inner;
  const uint t = gl_LocalInvocationID.x;
  float m = uintBitsToFloat(0xFF800000u);  // -inf
  for (uint j = t; j < pc.dim; j += 256u) m = max(m, load_in_(DT, pc.in_first + base + j * pc.inner));
  m = group_max(m);
  float s = 0.0;
  for (uint j = t; j < pc.dim; j += 256u) s += exp(load_in_(DT, pc.in_first + base + j * pc.inner) - m);
  s = group_sum(s);
  const float log_s = log(s);
  const float inv_s = 1.0 / s;
  for (uint j = t; j < pc.dim; j += 256u) {
    const float x = load_in_(DT, pc.in_first + base + j * pc.inner);
    store_out_(DT, pc.out_first + base + j * pc.inner, LOG != 0u ? x - m - log_s : exp(x - m) * inv_s);
  }
}
