// The copy family of the kernel table (internal): what Tensor::to / clone / contiguous /
// copy_ / fill_ / item run on. It lives in core because those are Tensor methods; the
// backends install its entries like any other family's.
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/tensor.h"

namespace kiln {

struct CopyKernels {
  // dst = src converted to dst's dtype, element by element; src is already expanded to
  // dst's sizes (stride 0 where it broadcasts), both on the table's device, no overlap.
  void (*copy)(const ExecutionContext& ctx, const Tensor& dst, const Tensor& src) = nullptr;
  // n elements in host memory from src_type to dst_type (strides in bytes), with the
  // same conversion rules: how item() and printing read one element.
  void (*cast_elements)(DType src_type, const void* src, int64_t src_stride_bytes, DType dst_type, void* dst,
                        int64_t dst_stride_bytes, int64_t n) = nullptr;
  // Device backends only: contiguous tensors of one dtype and shape, dst on the table's
  // device from src on the CPU (upload), and dst on the CPU from src on the device
  // (download, which waits for the device's pending work on src).
  void (*upload)(const ExecutionContext& ctx, const Tensor& dst, const Tensor& src) = nullptr;
  void (*download)(const ExecutionContext& ctx, const Tensor& dst, const Tensor& src) = nullptr;
};

inline KernelTable<CopyKernels> copy_kernels{"copy"};

}  // namespace kiln
