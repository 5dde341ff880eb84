// Strides in bytes for kernels that walk raw pointers (internal).
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::cpu {

// The byte stride of a dim of `size` elements. A dim of one element, or any dim of an
// empty tensor, may carry any stride (as in PyTorch, as_strided checks no extent that is
// never stepped), so its stride is never scaled: 2^61 elements times 4 bytes overflows.
// Every other stride is bounded by the storage it steps through.
inline int64_t byte_stride(int64_t size, int64_t stride, int64_t element_size) {
  return size <= 1 ? 0 : stride * element_size;
}

// Dim d of t, 0 when t has no element at all.
inline int64_t byte_stride(const Tensor& t, int64_t d, int64_t element_size) {
  return t.numel() == 0 ? 0 : byte_stride(t.size(d), t.stride(d), element_size);
}

}  // namespace kiln::cpu
