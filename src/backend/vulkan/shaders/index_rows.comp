// out[o, j, i] = in[o, rows[j], i] over contiguous [outer, R, inner] / [outer, size, inner]
// views (index_select, embedding: backend/index.h), moving ELEM_BYTES-byte elements as
// bits; rows is int32, already checked to lie in [0, size).
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ELEM_BYTES = 4;

KILN_BUFFER(0, dst, writeonly)
KILN_BUFFER(1, src, readonly)
layout(binding = 2, std430) readonly buffer Rows { int rows[]; };

layout(push_constant, std430) uniform Push {
  uint n;  // outer * R * inner
  uint R;
  uint inner;
  uint size;
  uint dst_first;
  uint src_first;
  uint rows_first;
} pc;

void main() {
  const uint e = linear_index(256u);
  if (e >= pc.n) return;
  const uint i = e % pc.inner;
  const uint t = e / pc.inner;
  const uint j = t % pc.R;
  const uint o = t / pc.R;
  const uint d = pc.dst_first + e;
  const uint s = pc.src_first + (o * pc.size + uint(rows[pc.rows_first + j])) * pc.inner + i;
  if (ELEM_BYTES == 1u) {
    dst8[d] = src8[s];
  } else if (ELEM_BYTES == 2u) {
    dst16[d] = src16[s];
  } else {
    const uint words = ELEM_BYTES / 4u;
    [[unroll]] for (uint w = 0u; w < 4u; ++w) {
      if (w < words) dst32[d * words + w] = src32[s * words + w];
    }
  }
}
