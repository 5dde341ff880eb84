// Limits every kiln tensor obeys.
#pragma once

#include <cstdint>

namespace kiln {

// The most dims a tensor may have. PyTorch's reductions and numpy 2 stop at 64 too; the
// CPU loops keep per-dim sizes and strides in fixed arrays of this length, so every op
// takes a view of any rank a tensor can have. Creating or viewing a tensor with more
// dims raises a RuntimeError naming the op.
inline constexpr int64_t kMaxTensorDims = 64;

// Raises the error above when `ndim` exceeds kMaxTensorDims.
void check_tensor_rank(int64_t ndim, const char* op);

}  // namespace kiln
