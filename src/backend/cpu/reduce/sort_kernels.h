// Sorting and top-k along one dim (torch.sort, torch.topk) on the CPU.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

// For each line of `input` (any strides, not complex, dim >= 1) along `dim` (wrapped),
// writes the first k elements of its stable ascending (or descending) order to
// `values` (input's dtype) and their positions to `indices` (int64). Both outputs are
// contiguous with input's shape except size k at `dim`. NaN sorts above every number
// and -0.0 equals 0.0. With `order_selected` false (topk's sorted=false) the k are
// the right ones in an unspecified order. k = size(dim) is a full sort.
void sort_kernel(ThreadPool& pool, const Tensor& input, int64_t dim, int64_t k, bool descending, bool order_selected,
                 const Tensor& values, const Tensor& indices);

}  // namespace kiln::cpu
