// Cumulative sums along one dim (torch.cumsum) on the CPU.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

// out[..., i, ...] = sum of input[..., 0..i, ...] along `dim` (already wrapped).
// `input` is contiguous; `out` is contiguous with the same shape and any dtype. The
// running sums are kept in int64 (bool and integers, wrapping like PyTorch's int64),
// double (floats) or complex<double>, whatever the storage dtypes.
void cumsum_kernel(ThreadPool& pool, const Tensor& input, int64_t dim, const Tensor& out);

}  // namespace kiln::cpu
