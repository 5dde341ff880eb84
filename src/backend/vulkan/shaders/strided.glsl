// The strided loop of vk_kernels.h (StridedPush): element i of the output in row-major
// order, and where each operand holds it. The geometry (sizes and strides of up to
// KILN_STRIDED_DIMS merged dims) travels in push constants, or, where the including
// shader defines KILN_STRIDED_GEOMETRY_BINDING, in that storage buffer (any number of dims).
#define KILN_STRIDED_DIMS 6
layout(push_constant, std430) uniform StridedPush {
  uint n;
  uint ndim;
  uint sizes[KILN_STRIDED_DIMS];
  uint first[3];
  uint strides[3 * KILN_STRIDED_DIMS];
  float alpha;  // elementwise: add's alpha or softplus's beta (not part of the copy kernel's constants)
  float threshold;  // elementwise: softplus's threshold
} pc;

#ifdef KILN_STRIDED_GEOMETRY_BINDING
// More than KILN_STRIDED_DIMS dims, or 4 operands: the geometry comes from a storage
// buffer (vk_kernels.h StridedLayout): with R = KILN_STRIDED_OPERANDS rows (3 or 4), R
// first elements, ndim sizes, then R x ndim strides; pc.first, pc.sizes and pc.strides
// are unused. A separate shader (the *_many_dims.comp variants, ternary.comp), so the
// common case keeps its push-constant-only pipeline.
#ifndef KILN_STRIDED_OPERANDS
#define KILN_STRIDED_OPERANDS 3
#endif
layout(set = 0, binding = KILN_STRIDED_GEOMETRY_BINDING, std430) readonly buffer StridedGeometry {
  uint geometry[];
};

// Offsets (in elements, from each binding's start) of element i in operands 0..3.
uvec4 strided_offsets4(uint i) {
  const uint rows = KILN_STRIDED_OPERANDS;
  const uint nd = pc.ndim;
  uvec4 off = uvec4(geometry[0], geometry[1], geometry[2], rows > 3u ? geometry[3] : 0u);
  uint rest = i;
  for (int d = int(nd) - 1; d >= 0; --d) {
    const uint size = geometry[rows + d];
    const uint idx = rest % size;
    rest /= size;
    const uint s = rows + nd + d;
    off += idx * uvec4(geometry[s], geometry[s + nd], geometry[s + 2u * nd], rows > 3u ? geometry[s + 3u * nd] : 0u);
  }
  return off;
}

uvec3 strided_offsets(uint i) { return strided_offsets4(i).xyz; }

#else

// Offsets (in elements, from each binding's start) of element i in operands 0..2.
uvec3 strided_offsets(uint i) {
  uvec3 off = uvec3(pc.first[0], pc.first[1], pc.first[2]);
  uint rest = i;
  for (int d = int(pc.ndim) - 1; d >= 0; --d) {
    const uint size = pc.sizes[d];
    const uint idx = rest % size;
    rest /= size;
    off += idx * uvec3(pc.strides[d], pc.strides[KILN_STRIDED_DIMS + d], pc.strides[2 * KILN_STRIDED_DIMS + d]);
  }
  return off;
}

#endif
