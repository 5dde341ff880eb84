// The sort family of the kernel table: sort, argsort and topk along one dim (front end:
// src/ops/sort.cpp).
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/tensor.h"

namespace kiln::backend {

// For each line of `input` (any strides, not complex, dim >= 1) along `dim` (wrapped),
// the first k elements of its stable ascending (or descending) order go to `values`
// (input's dtype) and their positions to `indices` (int64). Both outputs are contiguous
// with input's shape except size k at `dim`. NaN sorts above every number and -0.0
// equals 0.0. With `order_selected` false (topk's sorted=false) the k are the right
// ones in an unspecified order. k = size(dim) is a full sort.
struct SortProblem {
  const Tensor& input;
  int64_t dim;
  int64_t k;
  bool descending;
  bool order_selected;
  const Tensor& values;
  const Tensor& indices;
};

struct SortKernels {
  void (*sort)(const ExecutionContext& ctx, const SortProblem& p) = nullptr;
};

inline KernelTable<SortKernels> sort_kernels{"sort"};

}  // namespace kiln::backend
