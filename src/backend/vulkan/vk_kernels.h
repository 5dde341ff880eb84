// What every Vulkan kernel uses (internal): binding tensors to shader storage buffers,
// pipelines compiled once per (shader, specialisation constants) and cached, recording
// a dispatch, and the strided-loop layout shared by the elementwise and copy shaders.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "backend/vulkan/vk_device.h"
#include "kiln/tensor.h"

namespace kiln::vulkan {

// A tensor as a shader sees it: the buffer range bound (from the tensor's first byte,
// rounded down to the device's offset alignment) and the tensor's first element within
// it, counted in its own elements (the shader adds it to every index).
struct Binding {
  VkDescriptorBufferInfo buffer{};
  uint32_t first = 0;
};

// Raises a kiln::Error naming `op` when `t` is not on the Vulkan device, or spans more
// than one storage binding can reach (maxStorageBufferRange) or 2^31 elements.
Binding bind(const Tensor& t, const char* op);
// The same for a kernel-table argument given as a pointer: `elements` of `dtype` from
// `data` (a device address; null only when elements is 0).
Binding bind_raw(const void* data, DType dtype, int64_t elements, const char* op);

// Records one dispatch of `shader` (a name in shaders/, as a string literal: the pipeline
// cache keeps the pointer) with specialisation constants
// 0..n-1 = `spec`, storage buffers 0..m-1 = `buffers`, and `push` as push constants.
void dispatch(const char* op, const char* shader, std::span<const uint32_t> spec,
              std::initializer_list<Binding> buffers, const void* push, uint32_t push_bytes, uint32_t groups_x,
              uint32_t groups_y = 1, uint32_t groups_z = 1);

// Work-group counts for n invocations of `local` threads each, spread over a 2D grid when
// one dimension's limit (65535 on many devices) is too small; the shader rebuilds the
// linear index from gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x.
std::array<uint32_t, 2> grid_for(int64_t n, uint32_t local, const char* op);

// The strided loop of shaders/strided.glsl: up to 3 operands (4 with the geometry in a
// buffer), operand 0 the output, over the dims left after merging those every operand
// walks contiguously. Up to kStridedDims of them travel in push constants; a view with
// more (PyTorch allows any rank) runs the shader's *_many_dims variant, which reads them
// from a small storage buffer.
inline constexpr int kStridedDims = 6;
struct StridedPush {
  uint32_t n = 0;
  uint32_t ndim = 0;
  uint32_t sizes[kStridedDims] = {};
  uint32_t first[3] = {};
  uint32_t strides[3][kStridedDims] = {};
  float alpha = 1.0f;  // elementwise add's alpha or softplus's beta; unused by other kernels
  float threshold = 0.0f;  // elementwise softplus's threshold
};
static_assert(sizeof(StridedPush) <= 128, "push constants are limited to 128 bytes");

// The most operands a strided loop takes (the output and 3 inputs: where, clamp).
inline constexpr int kMaxStridedOperands = 4;

// A strided loop's push constants and, when its merged dims are more than kStridedDims or
// it has more than 3 operands, its geometry for the storage buffer: with R = max(3,
// operands) rows, R first elements, ndim sizes, then R x ndim strides (push.sizes,
// push.first and push.strides are unused then; push.n and push.ndim still count).
struct StridedLayout {
  StridedPush push;
  std::vector<uint32_t> geometry;  // empty when the dims fit in push
};

// Fills sizes/strides for `out` and `inputs` (already expanded to out's shape) and the
// bindings' first elements; n = out.numel().
StridedLayout strided_layout(const Tensor& out, std::initializer_list<const Tensor*> inputs,
                             std::initializer_list<const Binding*> bindings, const char* op);

// Records a strided kernel over out.numel() elements (push.n): `shader` with `buffers`
// when the geometry fits the push constants (one dispatch, nothing else), otherwise
// `many_dims_shader` with the geometry uploaded as one more storage buffer after them.
void dispatch_strided(const char* op, const char* shader, const char* many_dims_shader,
                      std::span<const uint32_t> spec, std::initializer_list<Binding> buffers,
                      const StridedLayout& layout);

// Raises NotImplemented: "<op>: no vulkan kernel yet (docs/gpu.md lists what runs
// there)". For the entries of a family the backend does not have, which front ends may
// call without asking first.
[[noreturn]] void missing_kernel(const char* op);

// Shader dtype codes (shaders/dtype.glsl): kiln's DType numbering.
inline uint32_t dtype_code(DType t) { return static_cast<uint32_t>(t); }

}  // namespace kiln::vulkan
