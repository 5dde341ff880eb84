// Installs the Vulkan copy kernels: same-device strided copies with the float casts
// (Tensor::copy_, clone, contiguous, to(dtype)), and the host <-> device transfers
// (Tensor::to(device)) through staging memory.
#include <cstring>

#include "backend/vulkan/vk_kernels.h"
#include "backend/vulkan/vk_memory.h"
#include "backend/vulkan/vk_recorder.h"
#include "core/copy_kernels.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

bool is_float_storage(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || is_fp8(t);
}

// Conversions the copy shader makes through float32 bits (shaders/common.glsl): between
// float storage dtypes, bool and uint8 to them (masks as 0 and 1), and them to bool.
bool converts(DType from, DType to) {
  if (is_float_storage(to)) return is_float_storage(from) || from == DType::Bool || from == DType::UInt8;
  return to == DType::Bool && is_float_storage(from);
}

void copy(const ExecutionContext&, const Tensor& dst, const Tensor& src) {
  const char* op = "copy_";
  if (dst.numel() == 0) return;
  KILN_CHECK_KIND(dst.dtype() == src.dtype() || converts(src.dtype(), dst.dtype()), NotImplemented, op,
                  "converting {} to {} on vulkan is not implemented yet (same-dtype copies, conversions between "
                  "float32, float16, bfloat16 and float8, and bool/uint8 to and bool from those are)",
                  dtype_name(src.dtype()), dtype_name(dst.dtype()));
  const Binding d = bind(dst, op);
  const Binding s = bind(src, op);
  const StridedLayout layout = strided_layout(dst, {&src}, {&d, &s}, op);
  const uint32_t spec[] = {dtype_code(src.dtype()), dtype_code(dst.dtype())};
  dispatch_strided(op, "copy", "copy_many_dims", spec, {d, s}, layout);
}

// One transfer command between a device tensor and a staging block.
void record_transfer(VkBuffer from, VkDeviceSize from_offset, VkBuffer to, VkDeviceSize to_offset,
                     VkDeviceSize bytes) {
  Recorder& r = recorder();
  VkCommandBuffer cb = r.begin_command();
  const VkBufferCopy region{from_offset, to_offset, bytes};
  vk.vkCmdCopyBuffer(cb, from, to, 1, &region);
  r.end_command();
}

// Staging memory for `bytes`, retrying once after giving the cache back.
void* staging_block(size_t bytes, const char* op) {
  void* p = allocate_or_wait(staging_pool(), bytes);
  KILN_CHECK(p != nullptr, op, "not enough memory: you tried to allocate {} bytes of Vulkan staging memory", bytes);
  return p;
}

void upload(const ExecutionContext&, const Tensor& dst, const Tensor& src) {
  const char* op = "to";
  const size_t bytes = src.nbytes();
  void* stage = staging_block(bytes, op);
  const BufferSpan staged = staging_pool().resolve(stage, op);
  std::memcpy(staged.mapped, src.data_ptr(), bytes);
  const BufferSpan target = device_pool().resolve(dst.data_ptr(), op);
  Recorder& r = recorder();
  auto lock = r.lock();
  record_transfer(staged.buffer, staged.offset, target.buffer, target.offset, bytes);
  // The staging block is reused only once the copy has run.
  r.on_done([stage] { staging_pool().free(stage); });
}

void download(const ExecutionContext&, const Tensor& dst, const Tensor& src) {
  const char* op = "to";
  const size_t bytes = src.nbytes();
  void* stage = staging_block(bytes, op);
  const BufferSpan staged = staging_pool().resolve(stage, op);
  const BufferSpan source = device_pool().resolve(src.data_ptr(), op);
  {
    Recorder& r = recorder();
    auto lock = r.lock();
    record_transfer(source.buffer, source.offset, staged.buffer, staged.offset, bytes);
    r.wait_all();
  }
  std::memcpy(dst.data_ptr(), staged.mapped, bytes);
  staging_pool().free(stage);
}

const bool registered = [] {
  CopyKernels k;
  k.copy = &copy;
  k.upload = &upload;
  k.download = &download;
  // Host elements only (item() reads device elements after a download).
  k.cast_elements = [](DType src_type, const void* src, int64_t src_stride, DType dst_type, void* dst,
                       int64_t dst_stride, int64_t n) {
    copy_kernels.on(kCPU, "item").cast_elements(src_type, src, src_stride, dst_type, dst, dst_stride, n);
  };
  copy_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
