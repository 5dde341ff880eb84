#include "backend/vulkan/vk_kernels.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/vulkan/embedded_shaders.h"
#include "backend/vulkan/vk_memory.h"
#include "backend/vulkan/vk_recorder.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

struct Pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

// A pipeline's identity. `shader` is one of the names in shaders/ passed as a string
// literal, so the view stays valid; the key is built and hashed without allocating,
// since every dispatch looks its pipeline up.
constexpr size_t kMaxSpecConstants = 8;
constexpr size_t kMaxBuffers = 8;
struct PipelineKey {
  std::string_view shader;
  uint32_t buffers = 0;
  uint32_t push_bytes = 0;
  uint32_t spec_count = 0;
  std::array<uint32_t, kMaxSpecConstants> spec{};
  bool operator==(const PipelineKey&) const = default;
};
struct PipelineKeyHash {
  size_t operator()(const PipelineKey& k) const {
    size_t h = std::hash<std::string_view>()(k.shader);
    const auto mix = [&h](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(k.buffers);
    mix(k.push_bytes);
    for (uint32_t i = 0; i < k.spec_count; ++i) mix(k.spec[i]);
    return h;
  }
};

class PipelineCache {
 public:
  const Pipeline& get(const char* op, const char* shader, std::span<const uint32_t> spec, uint32_t buffers,
                      uint32_t push_bytes) {
    KILN_CHECK(spec.size() <= kMaxSpecConstants && buffers <= kMaxBuffers, op,
               "shader '{}' takes {} specialisation constants and {} buffers; kiln's pipelines take at most {} "
               "and {}",
               shader, spec.size(), buffers, kMaxSpecConstants, kMaxBuffers);
    PipelineKey key{shader, buffers, push_bytes, static_cast<uint32_t>(spec.size())};
    std::copy(spec.begin(), spec.end(), key.spec.begin());
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pipelines_.find(key);
    if (it != pipelines_.end()) return it->second;
    return pipelines_.emplace(key, create(op, shader, spec, buffers, push_bytes)).first->second;
  }

 private:
  VkShaderModule module(const char* op, const char* shader) {
    auto it = modules_.find(shader);
    if (it != modules_.end()) return it->second;
    const EmbeddedShader* code = find_embedded_shader(shader);
    KILN_CHECK(code != nullptr, op, "no Vulkan shader named '{}' is built in", shader);
    Context& c = context(op);
    VkShaderModuleCreateInfo info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    info.codeSize = code->bytes;
    info.pCode = code->code;
    VkShaderModule m;
    check(vk.vkCreateShaderModule(c.device, &info, nullptr, &m), op, "vkCreateShaderModule");
    modules_.emplace(shader, m);
    return m;
  }

  Pipeline create(const char* op, const char* shader, std::span<const uint32_t> spec, uint32_t buffers,
                  uint32_t push_bytes) {
    Context& c = context(op);
    Pipeline p;
    std::vector<VkDescriptorSetLayoutBinding> bindings(buffers);
    for (uint32_t i = 0; i < buffers; ++i) {
      bindings[i].binding = i;
      bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[i].descriptorCount = 1;
      bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo set{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    set.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
    set.bindingCount = buffers;
    set.pBindings = bindings.data();
    check(vk.vkCreateDescriptorSetLayout(c.device, &set, nullptr, &p.set_layout), op, "vkCreateDescriptorSetLayout");
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout.setLayoutCount = 1;
    layout.pSetLayouts = &p.set_layout;
    layout.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
    layout.pPushConstantRanges = &range;
    check(vk.vkCreatePipelineLayout(c.device, &layout, nullptr, &p.layout), op, "vkCreatePipelineLayout");

    std::vector<VkSpecializationMapEntry> entries(spec.size());
    for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4u, 4};
    VkSpecializationInfo specialization{static_cast<uint32_t>(entries.size()), entries.data(), spec.size() * 4,
                                        spec.data()};
    VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module(op, shader);
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = spec.empty() ? nullptr : &specialization;
    info.layout = p.layout;
    check(vk.vkCreateComputePipelines(c.device, VK_NULL_HANDLE, 1, &info, nullptr, &p.pipeline), op,
          "vkCreateComputePipelines");
    return p;
  }

  std::mutex mutex_;
  std::map<std::string, VkShaderModule> modules_;
  std::unordered_map<PipelineKey, Pipeline, PipelineKeyHash> pipelines_;
};

PipelineCache& pipelines() {
  static auto* cache = new PipelineCache();
  return *cache;
}

// Elements from the first to one past the last the view reaches (0 when empty).
int64_t extent_elements(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return last + 1;
}

}  // namespace

Binding bind(const Tensor& t, const char* op) {
  KILN_CHECK(t.device().type == DeviceType::Vulkan, op, "expected a tensor on vulkan:0, got one on {}",
             t.device().str());
  return bind_raw(t.storage()->data == nullptr ? nullptr : t.data_ptr(), t.dtype(), extent_elements(t), op);
}

Binding bind_raw(const void* data, DType dtype, int64_t extent, const char* op) {
  Context& c = context(op);
  Binding b;
  if (data == nullptr || extent == 0) {
    // Nothing is read or written; the binding must still be a valid range.
    static void* dummy = device_pool().allocate(256);
    const BufferSpan span = device_pool().resolve(dummy, op);
    b.buffer = {span.buffer, span.offset, 256};
    return b;
  }
  const size_t element = itemsize(dtype);
  const BufferSpan span = device_pool().resolve(data, op);
  const VkDeviceSize align = c.properties.limits.minStorageBufferOffsetAlignment;
  const VkDeviceSize start = span.offset / align * align;
  const VkDeviceSize lead = span.offset - start;
  const VkDeviceSize reach = lead + static_cast<VkDeviceSize>(extent) * element;
  const VkDeviceSize max_range = c.properties.limits.maxStorageBufferRange;
  KILN_CHECK(reach <= max_range, op,
             "the tensor spans {} bytes, more than one Vulkan storage binding reaches on this device "
             "(maxStorageBufferRange {}); binding in blocks is not implemented yet",
             reach, max_range);
  KILN_CHECK(extent < (int64_t{1} << 31), op, "the tensor spans {} elements; Vulkan kernels index with 32 bits",
             extent);
  b.buffer = {span.buffer, start, std::min<VkDeviceSize>(span.bytes_to_end + lead, max_range)};
  b.first = static_cast<uint32_t>(lead / element);
  return b;
}

namespace {

void dispatch_bindings(const char* op, const char* shader, std::span<const uint32_t> spec,
                       std::span<const Binding> buffers, const void* push, uint32_t push_bytes, uint32_t groups_x,
                       uint32_t groups_y, uint32_t groups_z) {
  if (groups_x == 0 || groups_y == 0 || groups_z == 0) return;
  const Pipeline& p = pipelines().get(op, shader, spec, static_cast<uint32_t>(buffers.size()), push_bytes);
  // get() checked buffers.size() <= kMaxBuffers.
  std::array<VkDescriptorBufferInfo, kMaxBuffers> infos;
  std::array<VkWriteDescriptorSet, kMaxBuffers> writes;
  uint32_t count = 0;
  for (const Binding& b : buffers) {
    infos[count] = b.buffer;
    writes[count] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[count].dstBinding = count;
    writes[count].descriptorCount = 1;
    writes[count].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[count].pBufferInfo = &infos[count];
    ++count;
  }
  Recorder& r = recorder();
  auto lock = r.lock();
  VkCommandBuffer cb = r.begin_command();
  vk.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vk.vkCmdPushDescriptorSetKHR(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, count, writes.data());
  if (push_bytes > 0) vk.vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  vk.vkCmdDispatch(cb, groups_x, groups_y, groups_z);
  r.end_command();
}

}  // namespace

void dispatch(const char* op, const char* shader, std::span<const uint32_t> spec,
              std::initializer_list<Binding> buffers, const void* push, uint32_t push_bytes, uint32_t groups_x,
              uint32_t groups_y, uint32_t groups_z) {
  dispatch_bindings(op, shader, spec, std::span<const Binding>(buffers.begin(), buffers.size()), push, push_bytes,
                    groups_x, groups_y, groups_z);
}

void dispatch_strided(const char* op, const char* shader, const char* many_dims_shader,
                      std::span<const uint32_t> spec, std::initializer_list<Binding> buffers,
                      const StridedLayout& layout) {
  const auto grid = grid_for(layout.push.n, 256, op);
  if (layout.geometry.empty()) {
    dispatch(op, shader, spec, buffers, &layout.push, sizeof(layout.push), grid[0], grid[1]);
    return;
  }
  // The geometry goes up with the commands (no host wait). The block is freed when this
  // returns: the caching allocator hands it only to later work of this stream, which
  // every command's barrier orders after this dispatch.
  Tensor host = Tensor::empty({static_cast<int64_t>(layout.geometry.size())}, DType::Int32);
  std::memcpy(host.data_ptr(), layout.geometry.data(), layout.geometry.size() * sizeof(uint32_t));
  const Tensor geometry = host.to(kVulkan);
  KILN_CHECK(buffers.size() < kMaxBuffers, op, "too many buffers for a strided kernel");
  std::array<Binding, kMaxBuffers> all;
  std::copy(buffers.begin(), buffers.end(), all.begin());
  all[buffers.size()] = bind(geometry, op);
  dispatch_bindings(op, many_dims_shader, spec, std::span<const Binding>(all.data(), buffers.size() + 1),
                    &layout.push, sizeof(layout.push), grid[0], grid[1], 1);
}

std::array<uint32_t, 2> grid_for(int64_t n, uint32_t local, const char* op) {
  const int64_t groups = (n + local - 1) / local;
  const int64_t max_x = context(op).properties.limits.maxComputeWorkGroupCount[0];
  const int64_t max_y = context(op).properties.limits.maxComputeWorkGroupCount[1];
  if (groups <= max_x) return {static_cast<uint32_t>(groups), 1};
  const int64_t y = (groups + max_x - 1) / max_x;
  KILN_CHECK(y <= max_y, op, "{} elements need more work groups than the device allows", n);
  return {static_cast<uint32_t>(max_x), static_cast<uint32_t>(y)};
}

StridedLayout strided_layout(const Tensor& out, std::initializer_list<const Tensor*> inputs,
                             std::initializer_list<const Binding*> bindings, const char* op) {
  std::vector<const Tensor*> operands{&out};
  operands.insert(operands.end(), inputs.begin(), inputs.end());
  // Dims of size 1 go; neighbours every operand walks as one run merge.
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(operands.size());
  for (int64_t d = 0; d < out.dim(); ++d) {
    if (out.size(d) == 1) continue;
    bool merge = !sizes.empty();
    for (size_t k = 0; k < operands.size() && merge; ++k) {
      merge = strides[k].back() == operands[k]->stride(d) * out.size(d);
    }
    if (merge) {
      sizes.back() *= out.size(d);
      for (size_t k = 0; k < operands.size(); ++k) strides[k].back() = operands[k]->stride(d);
    } else {
      sizes.push_back(out.size(d));
      for (size_t k = 0; k < operands.size(); ++k) strides[k].push_back(operands[k]->stride(d));
    }
  }
  KILN_CHECK(out.numel() < (int64_t{1} << 32), op, "{} elements are too many for a Vulkan kernel (32-bit indices)",
             out.numel());
  KILN_CHECK(operands.size() <= static_cast<size_t>(kMaxStridedOperands) && bindings.size() == operands.size(), op,
             "a strided Vulkan kernel takes up to {} operands with a binding each", kMaxStridedOperands);
  StridedLayout layout;
  StridedPush& p = layout.push;
  p.n = static_cast<uint32_t>(out.numel());
  const size_t nd = sizes.size();
  p.ndim = static_cast<uint32_t>(nd);
  const size_t push_operands = std::size(p.first);
  const bool in_push = nd <= static_cast<size_t>(kStridedDims) && operands.size() <= push_operands;
  // The buffer's rows: first elements, sizes, then each operand's strides (at least the
  // 3 operands the copy and elementwise shaders walk).
  const size_t rows = std::max(push_operands, operands.size());
  if (!in_push) layout.geometry.assign(rows + (rows + 1) * nd, 0);
  for (size_t d = 0; d < nd; ++d) {
    // Every size divides numel (< 2^32), so each fits.
    const auto size = static_cast<uint32_t>(sizes[d]);
    (in_push ? p.sizes[d] : layout.geometry[rows + d]) = size;
    for (size_t k = 0; k < operands.size(); ++k) {
      KILN_CHECK(strides[k][d] >= 0 && strides[k][d] < (int64_t{1} << 31), op,
                 "stride {} is out of range for a Vulkan kernel", strides[k][d]);
      const auto stride = static_cast<uint32_t>(strides[k][d]);
      (in_push ? p.strides[k][d] : layout.geometry[rows + (k + 1) * nd + d]) = stride;
    }
  }
  size_t k = 0;
  for (const Binding* b : bindings) {
    (in_push ? p.first[k] : layout.geometry[k]) = b->first;
    ++k;
  }
  return layout;
}

void missing_kernel(const char* op) {
  fail(ErrorKind::NotImplemented, op, "no vulkan kernel yet (docs/gpu.md lists what runs there)");
}

}  // namespace kiln::vulkan
