// grouped_mm (backend/grouped_mm.h) with offs read on the device: a 16 x 16 tiled GEMM,
// one work group per (column tile, row tile, group z). Group z's rows (2Dx3D), columns
// (3Dx2D) or k range (2Dx2D) are [offs[z-1], offs[z]); tiles outside them return at
// once. In the jagged row/column cases the extra group z = G writes the zeros past
// offs[G-1]. Offsets that decrease or leave [0, extent] cannot raise an error without
// the host waiting for them, so they make the whole output NaN (the extra group, or each
// group in 2Dx2D, writes it) and nothing else is written. Tiles are loaded along each
// operand's unit-stride dim, so reads are coalesced for row- and column-major operands.
#version 450
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const uint KIND = 0;  // backend::GroupedMmCase
layout(constant_id = 1) const uint A_DT = DT_F32;
layout(constant_id = 2) const uint B_DT = DT_F32;
layout(constant_id = 3) const uint HAS_SCALE = 0;

#define JAGGED_2D_3D 0u
#define JAGGED_3D_2D 1u
#define JAGGED_2D_2D 2u
#define BATCHED_3D_3D 3u
#define TILE 16u

KILN_BUFFER(0, out_, writeonly)
KILN_BUFFER(1, a_, readonly)
KILN_BUFFER(2, b_, readonly)
KILN_BUFFER(3, offs_, readonly)
KILN_BUFFER(4, s_, readonly)
KILN_LOAD_FLOAT(a_)
KILN_LOAD_FLOAT(b_)
KILN_STORE_FLOAT(out_)

layout(push_constant, std430) uniform Push {
  uint M;  // A's rows (per group when A is 3-D)
  uint N;  // B's columns (per group when B is 3-D)
  uint K;  // A's columns
  uint G;
  uint a_bs, a_rs, a_cs;
  uint b_bs, b_rs, b_cs;
  uint extent;  // the size of the grouped dimension
  uint out_first, a_first, b_first, offs_first, s_first;
} pc;

shared float a_tile[TILE][TILE + 1];
shared float b_tile[TILE][TILE + 1];

int group_end(uint g) { return int(offs_32[pc.offs_first + g]); }

bool offs_valid() {
  int start = 0;
  for (uint g = 0u; g < pc.G; ++g) {
    const int end = group_end(g);
    if (end < start || end > int(pc.extent)) return false;
    start = end;
  }
  return true;
}

void main() {
  const uint z = gl_WorkGroupID.z;
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint n = gl_WorkGroupID.x * TILE + tx;
  const uint m = gl_WorkGroupID.y * TILE + ty;
  const bool jagged_out = KIND == JAGGED_2D_3D || KIND == JAGGED_3D_2D;
  const bool valid = KIND == BATCHED_3D_3D || offs_valid();
  // The output frame of this group: [M, N] at out_first (+ z M N for a 3-D output).
  const uint frame = pc.out_first + (jagged_out ? 0u : z * pc.M * pc.N);
  if (!valid) {
    if ((!jagged_out || z == pc.G) && m < pc.M && n < pc.N) store_out_(A_DT, frame + m * pc.N + n, uintBitsToFloat(0x7FC00000u));
    return;
  }
  uint start = 0u, end = 0u;  // the group's range of the grouped dim
  if (KIND != BATCHED_3D_3D) {
    start = z == 0u ? 0u : uint(group_end(z - 1u));
    end = z < pc.G ? uint(group_end(z)) : pc.extent;
  }
  if (jagged_out && z == pc.G) {
    // Past offs[G-1]: zeros.
    const uint i = KIND == JAGGED_2D_3D ? m : n;
    if (m < pc.M && n < pc.N && i >= start) store_out_(A_DT, frame + m * pc.N + n, 0.0);
    return;
  }
  // Rows or columns of this tile inside the group (uniform over the work group).
  const uint m0 = gl_WorkGroupID.y * TILE, n0 = gl_WorkGroupID.x * TILE;
  if (KIND == JAGGED_2D_3D && (m0 >= end || m0 + TILE <= start)) return;
  if (KIND == JAGGED_3D_2D && (n0 >= end || n0 + TILE <= start)) return;
  const bool in_group = KIND == JAGGED_2D_3D ? (m >= start && m < end)
                      : KIND == JAGGED_3D_2D ? (n >= start && n < end) : true;
  const uint k_begin = KIND == JAGGED_2D_2D ? start : 0u;
  const uint k_end = KIND == JAGGED_2D_2D ? end : pc.K;
  const uint a_base = pc.a_first + (KIND == JAGGED_3D_2D || KIND == BATCHED_3D_3D ? z * pc.a_bs : 0u);
  const uint b_base = pc.b_first + (KIND == JAGGED_2D_3D || KIND == BATCHED_3D_3D ? z * pc.b_bs : 0u);
  // Load along the unit-stride dim: (tile row, tile col) = (ty, tx) or (tx, ty).
  const bool a_cols_unit = pc.a_cs == 1u;
  const bool b_cols_unit = pc.b_cs == 1u;
  float acc = 0.0;
  for (uint k0 = k_begin; k0 < k_end; k0 += TILE) {
    {
      const uint r = a_cols_unit ? ty : tx, c = a_cols_unit ? tx : ty;
      const uint am = m0 + r, ak = k0 + c;
      a_tile[r][c] = am < pc.M && ak < k_end ? load_a_(A_DT, a_base + am * pc.a_rs + ak * pc.a_cs) : 0.0;
    }
    {
      const uint r = b_cols_unit ? ty : tx, c = b_cols_unit ? tx : ty;
      const uint bk = k0 + r, bn = n0 + c;
      b_tile[r][c] = bk < k_end && bn < pc.N ? load_b_(B_DT, b_base + bk * pc.b_rs + bn * pc.b_cs) : 0.0;
    }
    barrier();
    [[unroll]] for (uint k = 0u; k < TILE; ++k) acc += a_tile[ty][k] * b_tile[k][tx];
    barrier();
  }
  if (m >= pc.M || n >= pc.N || !in_group) return;
  if (HAS_SCALE != 0u) acc *= uintBitsToFloat(s_32[pc.s_first + z * pc.N + n]);
  store_out_(A_DT, frame + m * pc.N + n, acc);
}
