// y[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]) in float32 (backend/linear.h): one work
// group of 128 invocations per output element, reading the weight row coalesced (k =
// t, t + 128, ...) and reducing with subgroup adds. W is float32, float16, bfloat16, or
// float8_e4m3fn with float32 scales, per row (SCALES 1, applied after the sum) or per
// 128 x 128 block (SCALES 2: invocation t's k values fall in block i on step i, so the
// block's scale multiplies each product).
#version 450
#include "common.glsl"
#include "reduce.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint W_DT = DT_F32;
layout(constant_id = 1) const uint ACT_DT = DT_F32;
layout(constant_id = 2) const uint HAS_BIAS = 0;
layout(constant_id = 3) const uint SCALES = 0;

KILN_BUFFER(0, y_, writeonly)
KILN_BUFFER(1, x_, readonly)
KILN_BUFFER(2, w_, readonly)
KILN_BUFFER(3, b_, readonly)
KILN_BUFFER(4, s_, readonly)
KILN_LOAD_FLOAT(x_)
KILN_LOAD_FLOAT(w_)
KILN_LOAD_FLOAT(b_)
KILN_LOAD_FLOAT(s_)
KILN_STORE_FLOAT(y_)

layout(push_constant, std430) uniform Push {
  uint M;
  uint N;
  uint K;
  uint row_stride;
  uint bias_stride;
  uint k_blocks;  // ceil(K / 128)
  uint y_first;
  uint x_first;
  uint w_first;
  uint b_first;
  uint s_first;
} pc;

void main() {
  const uint n = group_row();
  const uint m = gl_WorkGroupID.z;
  if (n >= pc.N) return;
  const uint t = gl_LocalInvocationID.x;
  const uint x_row = pc.x_first + m * pc.K;
  const uint w_row = pc.w_first + n * pc.row_stride;
  float acc = 0.0;
  for (uint k = t, block = 0u; k < pc.K; k += 128u, ++block) {
    float p = load_x_(ACT_DT, x_row + k) * load_w_(W_DT, w_row + k);
    if (SCALES == 2u) p *= load_s_(DT_F32, pc.s_first + (n / 128u) * pc.k_blocks + block);
    acc += p;
  }
  acc = group_sum(acc);
  if (t != 0u) return;
  if (SCALES == 1u) acc *= load_s_(DT_F32, pc.s_first + n);
  if (HAS_BIAS != 0u) acc += load_b_(ACT_DT, pc.b_first + n * pc.bias_stride);
  store_y_(ACT_DT, pc.y_first + m * pc.N + n, acc);
}
