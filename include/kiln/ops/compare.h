// Whole-tensor and tolerance comparisons: torch.isclose, torch.allclose, torch.equal.
#pragma once

#include "kiln/tensor.h"

namespace kiln {

// |a - b| <= atol + rtol * |b| elementwise (bool, broadcast shape), PyTorch's rule: a and
// b must have the same dtype ("Float did not match Double"); equal values are close
// (inf == inf), so are two NaN with equal_nan; rtol and atol must be >= 0. Integer and
// bool inputs compute the difference and tolerance in float32 (PyTorch's default dtype);
// floating inputs in their own dtype (float16 rounds atol + rtol * |b| to float16, as
// PyTorch). Complex compares |a - b| with atol + rtol * |b|; a NaN in either part is NaN.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
// isclose(...).all().
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
// torch.equal: same sizes (no broadcasting) and every element equal after promotion to
// a common dtype; NaN is never equal. Tensors on different devices are an error.
bool equal(const Tensor& a, const Tensor& b);

}  // namespace kiln
