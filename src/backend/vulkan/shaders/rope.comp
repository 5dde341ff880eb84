// Rotary position embedding of contiguous [tokens, heads, head_dim] rows (backend/rope.h):
// one invocation per output element, in float32 over float storage, with float32 cos/sin
// tables [table_rows, rotary_dim / 2] (token t uses row t % table_rows). Non-interleaved
// (HF rotate_half) pairs d with d + half; interleaved pairs 2i with 2i + 1. Dims past
// rotary_dim are copied.
#version 450
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT = DT_F32;
layout(constant_id = 1) const uint INTERLEAVED = 0;

KILN_BUFFER(0, out_, writeonly)
KILN_BUFFER(1, x_, readonly)
KILN_BUFFER(2, cos_, readonly)
KILN_BUFFER(3, sin_, readonly)
KILN_LOAD_FLOAT(x_)
KILN_LOAD_FLOAT(cos_)
KILN_LOAD_FLOAT(sin_)
KILN_STORE_FLOAT(out_)

layout(push_constant, std430) uniform Push {
  uint n;  // tokens * heads * head_dim
  uint heads;
  uint head_dim;
  uint rotary_dim;
  uint table_rows;
  uint out_first;
  uint x_first;
  uint cos_first;
  uint sin_first;
} pc;

void main() {
  const uint e = linear_index(256u);
  if (e >= pc.n) return;
  const uint d = e % pc.head_dim;
  const uint row = e - d;  // first element of this head's vector
  const float x = load_x_(DT, pc.x_first + e);
  if (d >= pc.rotary_dim) {
    store_out_(DT, pc.out_first + e, x);
    return;
  }
  const uint half_dim = pc.rotary_dim / 2u;
  const uint token = e / (pc.heads * pc.head_dim);
  const uint table = (token % pc.table_rows) * half_dim;
  uint i, partner;
  bool first;
  if (INTERLEAVED != 0u) {
    i = d / 2u;
    first = (d & 1u) == 0u;
    partner = first ? d + 1u : d - 1u;
  } else {
    first = d < half_dim;
    i = first ? d : d - half_dim;
    partner = first ? d + half_dim : d - half_dim;
  }
  const float c = load_cos_(DT_F32, pc.cos_first + table + i);
  const float s = load_sin_(DT_F32, pc.sin_first + table + i);
  const float y = load_x_(DT, pc.x_first + row + partner);
  store_out_(DT, pc.out_first + e, first ? x * c - y * s : x * c + y * s);
}
