// The strided loop of vk_kernels.h (StridedPush): element i of the output in row-major
// order, and where each operand holds it.
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
