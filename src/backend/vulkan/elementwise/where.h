// The Vulkan where kernel (shaders/ternary.comp) for the other families that select
// elements by a mask (index/register.cpp's masked_fill).
#pragma once

#include "kiln/tensor.h"

namespace kiln::vulkan {

// out = cond ? a : b elementwise, every operand on the device and already expanded to
// out's shape; cond bool or uint8; a and b of out's dtype (bytes moved) or float storage
// (converted). Raises a kiln::Error naming `op` otherwise.
void record_where(const char* op, const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

}  // namespace kiln::vulkan
