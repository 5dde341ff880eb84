// Installs the Vulkan attention kernel (shaders/attention.comp): scaled dot-product
// attention for float32, float16 and bfloat16 q, k, v, with an additive float32 bias
// (the front end's form of every mask) and top-left is_causal. It serves
// scaled_dot_product_attention and attention_decode, which is what the LLM runtime's
// decode step runs against the device KV cache. The per-row element offsets (broadcast
// batches, grouped-query heads) go up to the device as one small uint32 table, once per
// distinct table and stream (then reused): no host wait. A decode step over a long
// context splits its keys over several work groups and merges them in a second pass.
// Dropout and float64 have no Vulkan kernel.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/attention.h"
#include "backend/vulkan/vk_kernels.h"
#include "core/device_runtime.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::vulkan {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
// shaders/attention.comp: head dims of q and k up to kMaxDim, of v up to 128 * 8.
constexpr int64_t kMaxDim = 1024;
constexpr int64_t kMaxValueDim = 128 * 8;
// Split attention (shaders/attention.comp SPLIT, then attention_merge.comp): when fewer
// (row, query) pairs than kFewItems meet more than kChunkKeys keys, the keys are cut
// into chunks of kChunkKeys (two tiles of the shader's 128) so a decode step over a long
// context gives a GPU rows x chunks work groups instead of one per query head.
constexpr int64_t kFewItems = 128;
constexpr int64_t kChunkKeys = 256;
constexpr int64_t kMaxChunks = 256;

// The row-offset tables recently sent, kept on the device per stream: every layer of a
// decode step (and every step) sends the same table, so it goes up once instead of once
// per call. Keyed by stream too: an upload recorded on one stream is not ordered before
// another stream's kernels. Bounded; the tables are a few hundred bytes.
class OffsetTables {
 public:
  Tensor get(const std::vector<int32_t>& table) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Key key{current_vulkan_stream(), table};
    auto it = tables_.find(key);
    if (it != tables_.end()) return it->second;
    if (tables_.size() >= kMaxTables) tables_.clear();
    Tensor host = Tensor::empty({static_cast<int64_t>(table.size())}, DType::Int32);
    std::copy(table.begin(), table.end(), host.data<int32_t>());
    return tables_.emplace(key, host.to(kVulkan)).first->second;
  }

 private:
  static constexpr size_t kMaxTables = 64;
  using Key = std::pair<int, std::vector<int32_t>>;
  std::mutex mutex_;
  std::map<Key, Tensor> tables_;
};

OffsetTables& offset_tables() {
  static auto* tables = new OffsetTables();  // lives as long as the device (never torn down before it)
  return *tables;
}

// Elements from a row's first to one past the last it reads: [n, width] with row stride
// `stride` (0 when n == 0).
int64_t rows_extent(int64_t n, int64_t stride, int64_t width) {
  if (n == 0 || width == 0) return 0;
  int64_t last = 0;
  KILN_CHECK(checked_mul(n - 1, stride, &last) && checked_add(last, width, &last), kOp, "size overflow");
  return last;
}

// The largest offset plus `extent`: the elements a binding must reach from the base.
int64_t reach(const int64_t* offsets, int64_t rows, int64_t extent) {
  int64_t top = 0;
  for (int64_t r = 0; r < rows; ++r) {
    KILN_CHECK(offsets[r] >= 0, kOp, "negative row offset {}", offsets[r]);
    top = std::max(top, offsets[r]);
  }
  int64_t total = 0;
  KILN_CHECK(checked_add(top, extent, &total), kOp, "size overflow");
  return total;
}

void attention(const ExecutionContext&, const backend::AttentionProblem& p) {
  KILN_CHECK_KIND(p.dtype == DType::Float32 || p.dtype == DType::Float16 || p.dtype == DType::BFloat16,
                  NotImplemented, kOp, "{} has no Vulkan attention kernel (float32, float16 and bfloat16 do)",
                  dtype_name(p.dtype));
  KILN_CHECK_KIND(p.dropout_p == 0, NotImplemented, kOp,
                  "dropout has no Vulkan attention kernel yet (dropout_p = 0 runs on the device)");
  KILN_CHECK_KIND(p.E <= kMaxDim && p.Ev <= kMaxValueDim, NotImplemented, kOp,
                  "the Vulkan attention kernel takes head dims up to {} (query/key) and {} (value), got {} and {}",
                  kMaxDim, kMaxValueDim, p.E, p.Ev);
  int64_t items = 0, out_elements = 0;
  KILN_CHECK(checked_mul(p.rows, p.L, &items) && checked_mul(items, p.Ev, &out_elements), kOp, "size overflow");
  KILN_CHECK(items < (int64_t{1} << 31), kOp, "{} (row, query) pairs are too many for the Vulkan attention kernel",
             items);
  if (items == 0) return;
  // The shader counts keys in 32 bits. Keys broadcast with stride 0 reach no further
  // than one key, so the bindings' bounds below do not limit their count.
  KILN_CHECK(p.S < (int64_t{1} << 31), kOp, "{} keys are too many for the Vulkan attention kernel", p.S);

  // Everything the kernel indexes is a 32-bit element index from each binding's start.
  const int64_t q_reach = reach(p.q_offset, p.rows, rows_extent(p.L, p.q_stride_l, p.E));
  const int64_t k_reach = reach(p.k_offset, p.rows, rows_extent(p.S, p.k_stride_s, p.E));
  const int64_t v_reach = reach(p.v_offset, p.rows, rows_extent(p.S, p.v_stride_s, p.Ev));
  int64_t bias_reach = 0;
  if (p.bias != nullptr) {
    int64_t extent = 0;
    KILN_CHECK(checked_mul(p.L - 1, p.bias_stride_l, &extent) &&
                   checked_add(extent, rows_extent(p.S, p.bias_stride_s, 1), &extent),
               kOp, "size overflow");
    bias_reach = reach(p.bias_offset, p.rows, extent);
  }

  std::vector<int32_t> o(static_cast<size_t>(p.rows) * 4);
  for (int64_t r = 0; r < p.rows; ++r) {
    // reach() bounded every offset by a binding's extent, which bind_raw keeps < 2^31.
    o[4 * r] = static_cast<int32_t>(p.q_offset[r]);
    o[4 * r + 1] = static_cast<int32_t>(p.k_offset[r]);
    o[4 * r + 2] = static_cast<int32_t>(p.v_offset[r]);
    o[4 * r + 3] = p.bias != nullptr ? static_cast<int32_t>(p.bias_offset[r]) : 0;
  }
  const Binding out = bind_raw(p.out, p.dtype, out_elements, kOp);
  const Binding q = bind_raw(p.q, p.dtype, q_reach, kOp);
  const Binding k = bind_raw(p.k, p.dtype, k_reach, kOp);
  const Binding v = bind_raw(p.v, p.dtype, v_reach, kOp);
  const Binding bias = p.bias != nullptr ? bind_raw(p.bias, DType::Float32, bias_reach, kOp) : q;
  const Tensor device_offsets = offset_tables().get(o);
  const Binding off = bind(device_offsets, kOp);

  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  // A stride of a dim that is never stepped may be anything (a length-1 query dim of a
  // decode step, say); every other one is bounded by its binding's reach (< 2^31).
  const auto step = [&](int64_t n, int64_t stride) { return n > 1 ? u32(stride) : 0u; };
  const int64_t chunks = items < kFewItems ? std::min(kMaxChunks, (p.S + kChunkKeys - 1) / kChunkKeys) : 1;
  const bool split = chunks > 1;
  // Split: float32 [items * chunks][2 + Ev] partial results (max, sum, accumulator).
  Tensor partials;
  if (split) {
    int64_t n = 0;
    KILN_CHECK(checked_mul(items * chunks, 2 + p.Ev, &n), kOp, "size overflow");
    partials = Tensor::empty({n}, DType::Float32, kVulkan, kOp);
  }
  const Binding part = split ? bind(partials, kOp) : out;
  struct {
    uint32_t rows, L, S, E, Ev, q_stride_l, k_stride_s, v_stride_s, bias_stride_l, bias_stride_s;
    uint32_t out_first, q_first, k_first, v_first, bias_first, off_first;
    float scale;
    uint32_t chunks, chunk_keys;
  } push{u32(p.rows),       u32(p.L),          u32(p.S),          u32(p.E),
         u32(p.Ev),         step(p.L, p.q_stride_l), step(p.S, p.k_stride_s), step(p.S, p.v_stride_s),
         p.bias != nullptr ? step(p.L, p.bias_stride_l) : 0u, p.bias != nullptr ? step(p.S, p.bias_stride_s) : 0u,
         out.first,         q.first,           k.first,           v.first,
         bias.first,        off.first,         static_cast<float>(p.scale),
         u32(chunks),       u32(kChunkKeys)};
  const uint32_t spec[] = {dtype_code(p.dtype), p.bias != nullptr ? 1u : 0u, p.causal ? 1u : 0u, split ? 1u : 0u};
  const auto grid = grid_for(items * chunks, 1, kOp);
  // The partials' binding starts at the buffer's aligned offset, which is where the
  // shader indexes from (a fresh allocation's first element is 0 of its binding).
  KILN_CHECK(!split || part.first == 0, kOp, "unaligned scratch memory");
  dispatch(kOp, "attention", spec, {out, q, k, v, bias, off, part}, &push, sizeof(push), grid[0], grid[1]);
  if (!split) return;
  struct {
    uint32_t items, Ev, chunks, out_first;
  } merge{u32(items), u32(p.Ev), u32(chunks), out.first};
  const uint32_t merge_spec[] = {dtype_code(p.dtype)};
  const auto merge_grid = grid_for(items, 1, kOp);
  dispatch(kOp, "attention_merge", merge_spec, {out, part}, &merge, sizeof(merge), merge_grid[0], merge_grid[1]);
}

const bool registered = [] {
  backend::AttentionKernels k;
  k.attention = &attention;
  backend::attention_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
