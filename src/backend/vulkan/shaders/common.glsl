// Shared by every kiln shader: extensions, IEEE inf/NaN preservation, dtype codes and
// the bit-exact conversions between float32 and the narrow float formats (ports of
// include/kiln/scalar_types.h, so the device rounds exactly as the CPU does).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_spirv_intrinsics : require
#extension GL_EXT_control_flow_attributes : require

// SignedZeroInfNanPreserve for 32-bit floats: the driver may not assume inputs are
// finite (masked softmax, NaN propagation, fp8 NaN codes).
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);

// kiln's DType numbering (include/kiln/dtype.h).
#define DT_BOOL 0u
#define DT_U8 1u
#define DT_I8 5u
#define DT_I16 6u
#define DT_I32 7u
#define DT_I64 8u
#define DT_F16 9u
#define DT_BF16 10u
#define DT_F32 11u
#define DT_F64 12u
#define DT_E4M3 15u
#define DT_E5M2 16u

uint element_bytes(uint dt) {
  if (dt == DT_F16 || dt == DT_BF16 || dt == DT_I16 || dt == 2u) return 2u;
  if (dt == DT_F32 || dt == DT_I32 || dt == 3u) return 4u;
  if (dt == DT_I64 || dt == DT_F64 || dt == 4u || dt == 13u) return 8u;
  if (dt == 14u) return 16u;
  return 1u;
}

// m / 2^shift rounded to nearest, ties to even (1 <= shift <= 31, m < 2^31).
uint shift_right_rne(uint m, uint shift) {
  return (m + ((1u << (shift - 1u)) - 1u) + ((m >> shift) & 1u)) >> shift;
}

// A float (as bits) to a small float code with E exponent and M mantissa bits; ieee:
// the all-ones exponent holds inf/NaN; payload: NaNs keep their top payload bits.
uint f32_to_small(uint u, uint E, uint M, bool ieee, bool payload) {
  const uint bias = (1u << (E - 1u)) - 1u;
  const uint mag_mask = (1u << (E + M)) - 1u;
  const uint man_mask = (1u << M) - 1u;
  const uint inf_code = ((1u << E) - 1u) << M;
  const uint sign = (u >> 31) << (E + M);
  const uint a = u & 0x7FFFFFFFu;
  const uint min_normal = (127u - bias + 1u) << 23;
  const uint rebias = (127u - bias) << 23;
  const uint overflow = ieee ? (((127u + (1u << E) - 2u - bias) << 23) | ((0x7FFFFFu >> (22u - M)) << (22u - M)))
                             : (((127u + (1u << E) - 1u - bias) << 23) | ((man_mask - 1u) << (23u - M)));
  const uint overflow_code = ieee ? inf_code : mag_mask - 1u;
  if (a > 0x7F800000u) {
    return payload ? (sign | inf_code | (1u << (M - 1u)) | ((a >> (23u - M)) & man_mask)) : (sign | mag_mask);
  }
  if (a >= overflow) return sign | overflow_code;
  if (a >= min_normal) return sign | shift_right_rne(a - rebias, 23u - M);
  const uint shift = 151u - bias - M - (a >> 23);
  if (shift > 24u) return sign;
  return sign | shift_right_rne((a & 0x7FFFFFu) | 0x800000u, shift);
}

// A small float code to float bits, exactly (subnormal codes become normal floats).
uint small_to_f32(uint code, uint E, uint M, bool ieee) {
  const uint bias = (1u << (E - 1u)) - 1u;
  const uint mag_mask = (1u << (E + M)) - 1u;
  const uint man_mask = (1u << M) - 1u;
  const uint inf_code = ((1u << E) - 1u) << M;
  const uint sign = (code & (1u << (E + M))) != 0u ? 0x80000000u : 0u;
  const uint mag = code & mag_mask;
  if (ieee && mag >= inf_code) {
    const uint quiet = mag > inf_code ? 0x400000u : 0u;
    return sign | 0x7F800000u | quiet | ((mag & man_mask) << (23u - M));
  }
  if (!ieee && mag == mag_mask) return sign | 0x7FC00000u;
  if (mag == 0u) return sign;
  if (mag <= man_mask) {
    // mag * 2^(1 - bias - M): normalise the leading one into the implicit bit.
    const int msb = findMSB(mag);
    const uint exponent = uint(int(127u + 1u - bias - M) + msb);
    return sign | (exponent << 23) | ((mag << (23 - msb)) & 0x7FFFFFu);
  }
  return sign | ((mag << (23u - M)) + ((127u - bias) << 23));
}

uint f32_to_bf16(uint u) {
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return ((u >> 16) | 0x40u) & 0xFFFFu;
  return ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) & 0xFFFFu;
}

// Float bits from a stored float code of dtype dt (16- or 8-bit codes zero-extended);
// a bool or uint8 byte as its value (masks in float arithmetic are 0 and 1).
uint code_to_f32(uint dt, uint code) {
  if (dt == DT_BOOL || dt == DT_U8) return floatBitsToUint(float(code));
  if (dt == DT_F16) return small_to_f32(code, 5u, 10u, true);
  if (dt == DT_BF16) return code << 16;
  if (dt == DT_E4M3) return small_to_f32(code, 4u, 3u, false);
  if (dt == DT_E5M2) return small_to_f32(code, 5u, 2u, true);
  return code;
}

// A float (as bits) to the code of dtype dt; to bool: 1 for anything nonzero (NaN too).
uint f32_to_code(uint dt, uint u) {
  if (dt == DT_BOOL) return (u & 0x7FFFFFFFu) != 0u ? 1u : 0u;
  if (dt == DT_F16) return f32_to_small(u, 5u, 10u, true, true);
  if (dt == DT_BF16) return f32_to_bf16(u);
  if (dt == DT_E4M3) return f32_to_small(u, 4u, 3u, false, false);
  if (dt == DT_E5M2) return f32_to_small(u, 5u, 2u, true, false);
  return u;
}

// Declares three views of storage buffer B (32-, 16- and 8-bit elements) named
// NAME32/NAME16/NAME8, plus float load/store helpers for float dtypes.
#define KILN_BUFFER(B, NAME, ACCESS)                                              \
  layout(binding = B, std430) ACCESS buffer NAME##_w32 { uint NAME##32[]; };       \
  layout(binding = B, std430) ACCESS buffer NAME##_w16 { uint16_t NAME##16[]; };   \
  layout(binding = B, std430) ACCESS buffer NAME##_w8 { uint8_t NAME##8[]; };

#define KILN_LOAD_FLOAT(NAME)                                                     \
  float load_##NAME(uint dt, uint i) {                                           \
    uint code;                                                                   \
    if (dt == DT_F32) code = NAME##32[i];                                        \
    else if (dt == DT_F16 || dt == DT_BF16) code = uint(NAME##16[i]);            \
    else code = uint(NAME##8[i]);                                                \
    return uintBitsToFloat(code_to_f32(dt, code));                               \
  }

#define KILN_STORE_FLOAT(NAME)                                                    \
  void store_##NAME(uint dt, uint i, float v) {                                  \
    const uint code = f32_to_code(dt, floatBitsToUint(v));                       \
    if (dt == DT_F32) NAME##32[i] = code;                                        \
    else if (dt == DT_F16 || dt == DT_BF16) NAME##16[i] = uint16_t(code);        \
    else NAME##8[i] = uint8_t(code);                                             \
  }

// The linear invocation index over a 2D grid of work groups of `local` threads.
uint linear_index(uint local) {
  return gl_GlobalInvocationID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x * local;
}
