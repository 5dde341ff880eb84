// The ternary elementwise ops of backend/elementwise.h over strided, broadcast operands:
//   where: out[i] = in0[i] ? in1[i] : in2[i], in0 a bool (or uint8) condition. The same
//     dtype in and out moves the element's bytes (any dtype); float storage dtypes
//     convert through float32 bits, exactly as the copy kernel (and the CPU) does.
//   clamp: out[i] = min(max(in0[i], in1[i]), in2[i]) in float32, NaN in any operand
//     propagating (PyTorch's; lo > hi gives hi).
// Four operands do not fit the push constants with 6 dims, so the geometry always comes
// from a storage buffer (strided.glsl); one small upload per call.
#version 450
#define KILN_STRIDED_GEOMETRY_BINDING 4
#define KILN_STRIDED_OPERANDS 4
#include "common.glsl"
#include "strided.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;  // TernaryOp: 0 where, 1 clamp
layout(constant_id = 1) const uint IN0_DT = DT_BOOL;
layout(constant_id = 2) const uint IN1_DT = DT_F32;
layout(constant_id = 3) const uint IN2_DT = DT_F32;
layout(constant_id = 4) const uint OUT_DT = DT_F32;

KILN_BUFFER(0, out_, writeonly)
KILN_BUFFER(1, in0_, readonly)
KILN_BUFFER(2, in1_, readonly)
KILN_BUFFER(3, in2_, readonly)
KILN_LOAD_FLOAT(in0_)
KILN_LOAD_FLOAT(in1_)
KILN_LOAD_FLOAT(in2_)
KILN_STORE_FLOAT(out_)

#define T_WHERE 0u
#define T_CLAMP 1u

// out[d] = NAME[s], the element's bytes (1, 2, 4, 8 or 16).
#define KILN_MOVE_FROM(NAME)                                        \
  void move_from_##NAME(uint d, uint s) {                           \
    const uint bytes = element_bytes(OUT_DT);                       \
    if (bytes == 1u) {                                              \
      out_8[d] = NAME##8[s];                                        \
    } else if (bytes == 2u) {                                       \
      out_16[d] = NAME##16[s];                                      \
    } else {                                                        \
      const uint words = bytes / 4u;                                \
      [[unroll]] for (uint w = 0u; w < 4u; ++w) {                   \
        if (w < words) out_32[d * words + w] = NAME##32[s * words + w]; \
      }                                                             \
    }                                                               \
  }
KILN_MOVE_FROM(in1_)
KILN_MOVE_FROM(in2_)

void main() {
  const uint i = linear_index(256u);
  if (i >= pc.n) return;
  const uvec4 off = strided_offsets4(i);
  if (OP == T_WHERE) {
    const bool pick_first = uint(in0_8[off.y]) != 0u;
    if (IN1_DT == OUT_DT && IN2_DT == OUT_DT) {
      if (pick_first) move_from_in1_(off.x, off.z);
      else move_from_in2_(off.x, off.w);
    } else {
      store_out_(OUT_DT, off.x, pick_first ? load_in1_(IN1_DT, off.z) : load_in2_(IN2_DT, off.w));
    }
    return;
  }
  const float x = load_in0_(IN0_DT, off.y), lo = load_in1_(IN1_DT, off.z), hi = load_in2_(IN2_DT, off.w);
  // A NaN as the CPU forms it: the sum carries a NaN operand through.
  const float r = isnan(x) || isnan(lo) || isnan(hi) ? (x + lo) + hi : min(max(x, lo), hi);
  store_out_(OUT_DT, off.x, r);
}
