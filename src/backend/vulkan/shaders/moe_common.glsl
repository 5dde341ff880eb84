// Shared by the MoE expert shaders (moe_gate_up.comp, moe_down.comp): a work group of
// 128 invocations owns 4 weight rows; invocation i reads columns i, i + 128, ... of all 4
// (coalesced across the group) and the 4 partial sums are reduced at once.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define MOE_LOCAL 128u
#define MOE_ROWS 4u

// Scale layouts (backend::Fp8ScaleLayout), as the SCALES specialisation constant.
#define MOE_NO_SCALES 0u
#define MOE_ROW_SCALES 1u
#define MOE_BLOCK_SCALES 2u

shared vec4 moe_partials[MOE_LOCAL];

// The work group's sum of v (every invocation must call it; every one gets the sum).
vec4 group_sum4(vec4 v) {
  v = subgroupAdd(v);
  if (subgroupElect()) moe_partials[gl_SubgroupID] = v;
  barrier();
  vec4 r = vec4(0.0);
  for (uint s = 0u; s < gl_NumSubgroups; ++s) r += moe_partials[s];
  barrier();
  return r;
}

// Element v of a 32-bit word packing 32 / bits codes of dtype dt (little-endian: element
// 0 in the low bits), as a float. The VEC > 1 paths read weights a word per invocation,
// so a subgroup of 32 reads 128 contiguous bytes of a row per load.
float word_element(uint dt, uint word, uint v) {
  const uint bits = element_bytes(dt) * 8u;
  const uint code = bits == 32u ? word : (word >> (v * bits)) & ((1u << bits) - 1u);
  return uintBitsToFloat(code_to_f32(dt, code));
}

float moe_silu(float g) { return g / (1.0 + exp(-g)); }

#define MOE_NAN uintBitsToFloat(0x7FC00000u)
