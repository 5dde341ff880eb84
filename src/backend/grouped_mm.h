// The grouped_mm family of the kernel table: grouped_mm and grouped_mm_fp8 (front end:
// src/ops/grouped_mm.cpp).
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// Which of torch.grouped_mm's four cases a call is (see include/kiln/ops/grouped_mm.h).
enum class GroupedMmCase {
  Jagged2Dx3D,   // A [M_total, K], B [G, K, N]       -> out [M_total, N], rows grouped
  Jagged3Dx2D,   // A [G, M, K],    B [K, N_total]    -> out [M, N_total], columns grouped
  Jagged2Dx2D,   // A [M, K_total], B [K_total, N]    -> out [G, M, N],    K grouped
  Batched3Dx3D,  // A [G, M, K],    B [G, K, N]       -> out [G, M, N],    plain bmm
};

// An operand: element (batch, r, c) of the last two dims is at
// data + batch * batch_stride + r * row_stride + c * col_stride (elements). 2-D operands
// ignore batch_stride. rows/cols are the sizes of the last two dims. The last two dims are
// row-major (col_stride == 1) or column-major (row_stride == 1), as the front end checks.
struct GroupedOperand {
  const void* data = nullptr;
  DType dtype = DType::Float32;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};

struct GroupedMmArgs {
  GroupedMmCase kind = GroupedMmCase::Jagged2Dx3D;
  GroupedOperand a;
  GroupedOperand b;  // float32/bfloat16/float16 like a, or float8_e4m3fn (grouped_mm_fp8)
  // float8_e4m3fn b only: contiguous float32 [G, N] scales, out[:, n] of group g is
  // multiplied by b_scale[g * N + n] after the dot products.
  const float* b_scale = nullptr;
  int64_t groups = 0;
  // G int32 exclusive cumulative ends (nullptr for Batched3Dx3D), read by the kernel.
  const int32_t* offs = nullptr;
  // Output of `out_dtype` (a's dtype), contiguous, shaped as listed for `kind`.
  void* out = nullptr;
  DType out_dtype = DType::Float32;
};

struct GroupedMmKernels {
  // Offsets that decrease or leave [0, extent] of the grouped dimension are a Value error
  // (raised before any output is written). Rows (2Dx3D) or columns (3Dx2D) past
  // offs[G-1] are zeros (PyTorch leaves them uninitialised).
  void (*grouped_mm)(const ExecutionContext& ctx, const GroupedMmArgs& args) = nullptr;
};

inline KernelTable<GroupedMmKernels> grouped_mm_kernels{"grouped_mm"};

}  // namespace kiln::backend
