// Installs the Vulkan grouped_mm kernel (shaders/moe_grouped_mm.comp), which serves
// grouped_mm and grouped_mm_fp8: offs is read by the kernel on the device, so a grouped
// product after moe_route/moe_permute on the device needs no host wait. Offsets the host
// would refuse make the output NaN instead (the host does not see them).
#include <algorithm>

#include "backend/grouped_mm.h"
#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::vulkan {
namespace {

constexpr const char* kOp = "grouped_mm";
constexpr int64_t kTile = 16;  // TILE in the shader
constexpr int64_t kMaxGroups = 65535;

// Elements an operand's view reaches: batches (3-D) of rows x cols.
int64_t operand_extent(const backend::GroupedOperand& o, int64_t batches) {
  if (o.rows == 0 || o.cols == 0 || batches == 0) return 0;
  int64_t last = 0, part = 0;
  KILN_CHECK(checked_mul(batches - 1, o.batch_stride, &last) && checked_mul(o.rows - 1, o.row_stride, &part) &&
                 checked_add(last, part, &last) && checked_mul(o.cols - 1, o.col_stride, &part) &&
                 checked_add(last, part, &last),
             kOp, "size overflow");
  return last + 1;
}

uint32_t u32(int64_t v) {
  KILN_CHECK(v >= 0 && v < (int64_t{1} << 31), kOp, "size or stride {} is out of range for a Vulkan kernel", v);
  return static_cast<uint32_t>(v);
}

void grouped_mm(const ExecutionContext&, const backend::GroupedMmArgs& p) {
  using backend::GroupedMmCase;
  const bool a3 = p.kind == GroupedMmCase::Jagged3Dx2D || p.kind == GroupedMmCase::Batched3Dx3D;
  const bool b3 = p.kind == GroupedMmCase::Jagged2Dx3D || p.kind == GroupedMmCase::Batched3Dx3D;
  const bool jagged_out = p.kind == GroupedMmCase::Jagged2Dx3D || p.kind == GroupedMmCase::Jagged3Dx2D;
  const int64_t G = p.groups, M = p.a.rows, N = p.b.cols, K = p.a.cols;
  int64_t out_elements = 0;
  KILN_CHECK(checked_mul(M, N, &out_elements) && (jagged_out || checked_mul(out_elements, G, &out_elements)), kOp,
             "size overflow");
  if (out_elements == 0) return;
  const int64_t extent = p.kind == GroupedMmCase::Jagged2Dx3D ? M : p.kind == GroupedMmCase::Jagged3Dx2D ? N : K;
  const int64_t z_groups = G + (jagged_out ? 1 : 0);
  KILN_CHECK(ceil_div(M, kTile) <= kMaxGroups && ceil_div(N, kTile) <= kMaxGroups && z_groups <= kMaxGroups, kOp,
             "the Vulkan kernel takes up to {} rows, columns and groups, got [{}, {}] and {} groups",
             kMaxGroups * kTile, M, N, G);
  const Binding out = bind_raw(p.out, p.out_dtype, out_elements, kOp);
  const Binding a = bind_raw(p.a.data, p.a.dtype, operand_extent(p.a, a3 ? G : 1), kOp);
  const Binding b = bind_raw(p.b.data, p.b.dtype, operand_extent(p.b, b3 ? G : 1), kOp);
  const Binding offs = p.offs != nullptr ? bind_raw(p.offs, DType::Int32, G, kOp) : out;
  int64_t scale_elements = 0;
  KILN_CHECK(checked_mul(G, N, &scale_elements), kOp, "size overflow");
  const Binding scale = p.b_scale != nullptr ? bind_raw(p.b_scale, DType::Float32, scale_elements, kOp) : out;
  const uint32_t push[] = {u32(M),
                           u32(N),
                           u32(K),
                           u32(G),
                           u32(a3 ? p.a.batch_stride : 0),
                           u32(p.a.row_stride),
                           u32(p.a.col_stride),
                           u32(b3 ? p.b.batch_stride : 0),
                           u32(p.b.row_stride),
                           u32(p.b.col_stride),
                           u32(extent),
                           out.first,
                           a.first,
                           b.first,
                           offs.first,
                           scale.first};
  const uint32_t spec[] = {static_cast<uint32_t>(p.kind), dtype_code(p.a.dtype), dtype_code(p.b.dtype),
                           p.b_scale != nullptr ? 1u : 0u};
  dispatch(kOp, "moe_grouped_mm", spec, {out, a, b, offs, scale}, push, sizeof(push),
           static_cast<uint32_t>(ceil_div(N, kTile)), static_cast<uint32_t>(ceil_div(M, kTile)),
           static_cast<uint32_t>(z_groups));
}

const bool registered = [] {
  backend::GroupedMmKernels k;
  k.grouped_mm = &grouped_mm;
  backend::grouped_mm_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace
}  // namespace kiln::vulkan
