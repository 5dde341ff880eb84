// One value per contiguous row: sum (divided by `divisor`: mean), max or min, in float32
// over float storage (backend/reduce.h); one work group per row. max/min: NaN wins.
#version 450
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint IN_DT = DT_F32;
layout(constant_id = 1) const uint OUT_DT = DT_F32;
layout(constant_id = 2) const uint KIND = 0;  // 0 sum, 2 max, 3 min (backend::ReduceKind)

KILN_BUFFER(0, out_, writeonly)
KILN_BUFFER(1, in_, readonly)
KILN_LOAD_FLOAT(in_)
KILN_STORE_FLOAT(out_)

layout(push_constant, std430) uniform Push {
  uint rows;
  uint cols;
  float divisor;
  uint out_first;
  uint in_first;
} pc;

void main() {
  const uint row = group_row();
  if (row >= pc.rows) return;
  const uint t = gl_LocalInvocationID.x;
  const uint base = pc.in_first + row * pc.cols;
  if (KIND == 0u) {
    float s = 0.0;
    for (uint j = t; j < pc.cols; j += 256u) s += load_in_(IN_DT, base + j);
    s = group_sum(s);
    if (t == 0u) store_out_(OUT_DT, pc.out_first + row, s / pc.divisor);
    return;
  }
  // max(x) = -min(-x): one code path for both, NaN tracked on the side (GLSL's max and
  // subgroupMax leave NaN inputs undefined).
  const float sign = KIND == 2u ? 1.0 : -1.0;
  float m = uintBitsToFloat(0xFF800000u);
  float nan_seen = 0.0;
  for (uint j = t; j < pc.cols; j += 256u) {
    const float x = load_in_(IN_DT, base + j);
    if (isnan(x)) nan_seen = 1.0; else m = max(m, sign * x);
  }
  m = group_max(m);
  nan_seen = group_max(nan_seen);
  if (t == 0u) store_out_(OUT_DT, pc.out_first + row, nan_seen != 0.0 ? uintBitsToFloat(0x7FC00000u) : sign * m);
}
