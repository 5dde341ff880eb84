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
// More than KILN_STRIDED_DIMS dims: the sizes and strides come from a storage buffer of
// 4 x ndim words (sizes, then each operand's strides), and pc.sizes / pc.strides are
// unused. A separate shader (the *_many_dims.comp variants), so the common case keeps
// its push-constant-only pipeline.
layout(set = 0, binding = KILN_STRIDED_GEOMETRY_BINDING, std430) readonly buffer StridedGeometry {
  uint geometry[];
};
#endif

// Offsets (in elements, from each binding's start) of element i in operands 0..2.
uvec3 strided_offsets(uint i) {
  uvec3 off = uvec3(pc.first[0], pc.first[1], pc.first[2]);
  uint rest = i;
#ifdef KILN_STRIDED_GEOMETRY_BINDING
  const uint nd = pc.ndim;
  for (int d = int(nd) - 1; d >= 0; --d) {
    const uint size = geometry[d];
    const uint idx = rest % size;
    rest /= size;
    off += idx * uvec3(geometry[nd + d], geometry[2u * nd + d], geometry[3u * nd + d]);
  }
#else
  for (int d = int(pc.ndim) - 1; d >= 0; --d) {
    const uint size = pc.sizes[d];
    const uint idx = rest % size;
    rest /= size;
    off += idx * uvec3(pc.strides[d], pc.strides[KILN_STRIDED_DIMS + d], pc.strides[2 * KILN_STRIDED_DIMS + d]);
  }
#endif
  return off;
}
