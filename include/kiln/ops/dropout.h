// torch.nn.functional.dropout.
#pragma once

#include "kiln/generator.h"
#include "kiln/tensor.h"

namespace kiln {

// While training, each element is zeroed with probability p and the others are scaled
// by 1 / (1 - p); the mask comes from a counter-based (Philox) stream of `gen` (the
// thread's default generator when null), so one seed gives one mask whatever the thread
// count. training=false, p = 0 or an empty input return the input itself; p = 1 gives
// input * 0 (zeros, NaN stays NaN, as PyTorch). Floating dtypes only. Differentiable:
// the gradient is the same mask times the output gradient.
// Errors: Value for p outside [0, 1] ("dropout probability has to be between 0 and 1,
// but got 1.5"), Type for a non-floating input.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* gen = nullptr);

// torch.nn.functional.dropout2d: whole channels are zeroed (each with probability p) and
// the others scaled by 1 / (1 - p). input is [N, C, H, W] or unbatched [C, H, W]; the
// same edges, generator and errors as dropout (Runtime for another number of dims).
Tensor dropout2d(const Tensor& input, double p = 0.5, bool training = true, Generator* gen = nullptr);

}  // namespace kiln
