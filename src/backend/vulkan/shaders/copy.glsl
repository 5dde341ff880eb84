// dst[i] = src[i] converted from SRC_DT to DST_DT, both strided (Tensor::copy_, clone,
// contiguous, to(dtype)). The same dtype moves bits; different float dtypes convert
// through float32 bits, so NaN payloads and subnormals come out as on the CPU.
//
// The body of copy.comp and copy_many_dims.comp.
#include "common.glsl"
#include "strided.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SRC_DT = DT_F32;
layout(constant_id = 1) const uint DST_DT = DT_F32;

KILN_BUFFER(0, dst, writeonly)
KILN_BUFFER(1, src, readonly)

void main() {
  const uint i = linear_index(256u);
  if (i >= pc.n) return;
  const uvec3 off = strided_offsets(i);
  const uint d = off.x, s = off.y;
  if (SRC_DT == DST_DT) {
    const uint bytes = element_bytes(SRC_DT);
    if (bytes == 1u) {
      dst8[d] = src8[s];
    } else if (bytes == 2u) {
      dst16[d] = src16[s];
    } else {
      const uint words = bytes / 4u;
      [[unroll]] for (uint w = 0u; w < 4u; ++w) {
        if (w < words) dst32[d * words + w] = src32[s * words + w];
      }
    }
    return;
  }
  uint code;
  if (SRC_DT == DT_F32) code = src32[s];
  else if (SRC_DT == DT_F16 || SRC_DT == DT_BF16) code = uint(src16[s]);
  else code = uint(src8[s]);
  const uint out_code = f32_to_code(DST_DT, code_to_f32(SRC_DT, code));
  if (DST_DT == DT_F32) dst32[d] = out_code;
  else if (DST_DT == DT_F16 || DST_DT == DT_BF16) dst16[d] = uint16_t(out_code);
  else dst8[d] = uint8_t(out_code);
}
