// The softmax family of the kernel table: softmax and log_softmax over the middle dim of
// a contiguous [outer, dim, inner] array (front end: src/ops/softmax.cpp).
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// `in` and `out` both have the [outer, dim, inner] layout and `dtype`. Float32 and
// float64 compute in themselves; with inner == 1, float16 and bfloat16 rows are staged
// through float32. Narrow columns (inner > 1) are the front end's to widen first.
struct SoftmaxProblem {
  DType dtype;
  const void* in;
  void* out;
  int64_t outer;
  int64_t dim;
  int64_t inner;
  bool log;
};

struct SoftmaxKernels {
  // Results do not depend on the thread count beyond the order of the final
  // double-precision sum of a split row's parts.
  void (*softmax)(const ExecutionContext& ctx, const SoftmaxProblem& p) = nullptr;
};

inline KernelTable<SoftmaxKernels> softmax_kernels{"softmax"};

}  // namespace kiln::backend
