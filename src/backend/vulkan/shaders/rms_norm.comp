// rms_norm of each contiguous row (one work group per row), in float32 over float
// storage (backend/norm.h): r = 1 / sqrt(mean(x^2) + eps), then
//   KIND 0 (ScaleThenWeight): y = (x r) w, rounded once to OUT_DT;
//   KIND 1 (RoundThenWeight): y = w * round(x r, IN_DT)   (LlamaRMSNorm);
//   KIND 2 (Gated): n = round(w * round(x r, IN_DT), W_DT); y = n * silu(gate), the
//   gate float32 [rows, cols] (the Qwen3-Next / Qwen3.5 DeltaNet output norm).
#version 450
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint IN_DT = DT_F32;
layout(constant_id = 1) const uint OUT_DT = DT_F32;
layout(constant_id = 2) const uint KIND = 0;
layout(constant_id = 3) const uint HAS_WEIGHT = 1;
layout(constant_id = 4) const uint W_DT = DT_F32;  // Gated: the dtype w * n rounds to

KILN_BUFFER(0, out_, writeonly)
KILN_BUFFER(1, in_, readonly)
KILN_BUFFER(2, w_, readonly)
KILN_BUFFER(3, gate_, readonly)
KILN_LOAD_FLOAT(in_)
KILN_LOAD_FLOAT(gate_)
KILN_LOAD_FLOAT(w_)
KILN_STORE_FLOAT(out_)

layout(push_constant, std430) uniform Push {
  uint rows;
  uint cols;
  float eps;
  uint out_first;
  uint in_first;
  uint w_first;
  uint gate_first;
} pc;

// A float32 value rounded to dtype dt and back (exact for float32).
float round_to(uint dt, float v) { return uintBitsToFloat(code_to_f32(dt, f32_to_code(dt, floatBitsToUint(v)))); }

void main() {
  const uint row = group_row();
  if (row >= pc.rows) return;
  const uint t = gl_LocalInvocationID.x;
  const uint base = row * pc.cols;
  float ss = 0.0;
  for (uint j = t; j < pc.cols; j += 256u) {
    const float x = load_in_(IN_DT, pc.in_first + base + j);
    ss += x * x;
  }
  ss = group_sum(ss);
  const float r = 1.0 / sqrt(ss / float(pc.cols) + pc.eps);
  for (uint j = t; j < pc.cols; j += 256u) {
    const float x = load_in_(IN_DT, pc.in_first + base + j);
    const float w = HAS_WEIGHT != 0u ? load_w_(DT_F32, pc.w_first + j) : 1.0;
    float y;
    if (KIND == 0u) {
      y = (x * r) * w;
    } else if (KIND == 1u) {
      y = w * round_to(IN_DT, x * r);
    } else {
      const float n = round_to(W_DT, w * round_to(IN_DT, x * r));
      const float gt = load_gate_(DT_F32, pc.gate_first + base + j);
      y = n * (gt * (1.0 / (1.0 + exp(-gt))));  // silu as the elementwise kernel computes it
    }
    store_out_(OUT_DT, pc.out_first + base + j, y);
  }
}
