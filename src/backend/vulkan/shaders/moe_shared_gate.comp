// The shared expert's weight per token (backend/moe.h): w[t] = sigmoid(x[t] . gate),
// one work group per token, float32 (the CPU sums in float64; the tests allow for it).
#version 450
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint ACT_DT = DT_F32;

KILN_BUFFER(0, w_, writeonly)
KILN_BUFFER(1, x_, readonly)
KILN_BUFFER(2, g_, readonly)
KILN_LOAD_FLOAT(x_)

layout(push_constant, std430) uniform Push {
  uint tokens;
  uint hidden;
  uint w_first;
  uint x_first;
  uint g_first;
} pc;

void main() {
  const uint t = group_row();
  if (t >= pc.tokens) return;
  float acc = 0.0;
  for (uint k = gl_LocalInvocationID.x; k < pc.hidden; k += 128u) {
    acc += load_x_(ACT_DT, pc.x_first + t * pc.hidden + k) * uintBitsToFloat(g_32[pc.g_first + k]);
  }
  acc = group_sum(acc);
  if (gl_LocalInvocationID.x == 0u) w_32[pc.w_first + t] = floatBitsToUint(1.0 / (1.0 + exp(-acc)));
}
