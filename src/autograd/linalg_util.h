// Matrix helpers of the linear-algebra backward formulas (internal). Every one is built
// from recorded ops (masks and identities are constants), so formulas written with them
// can be differentiated again (create_graph).
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::autograd::la {

// The conjugate transpose of the last two dims (PyTorch's mH) and the plain transpose.
Tensor mH(const Tensor& x);
Tensor mT(const Tensor& x);
// torch.triu / torch.tril are the public kiln::triu / kiln::tril (kiln/ops/shape.h).
// The main diagonal of square matrices [..., n, n] -> [..., n], and its inverse.
Tensor diagonal(const Tensor& x);
Tensor diag_embed(const Tensor& v);
// x with its main diagonal (square matrices) set to zero.
Tensor off_diagonal(const Tensor& x);
// The real and imaginary parts of z as tensors of z's dtype (zero imaginary part), so a
// complex formula stays complex; the identity and zeros for real z.
Tensor real_of(const Tensor& z);
Tensor imag_of(const Tensor& z);
// Not recorded: the imaginary part as a real tensor (for the gauge checks).
Tensor imag_values(const Tensor& z);
// Whether |a - b| <= atol + rtol |b| everywhere (torch.allclose; not recorded).
bool all_close(const Tensor& a, const Tensor& b, double rtol, double atol);

// The factors of packed LU (lu_factor's output): P (constant, from the 1-based pivots),
// L (unit lower, m x k) and U (upper, k x n), the last two recorded from LU.
struct LuFactors {
  Tensor P, L, U;
};
LuFactors lu_unpack(const Tensor& LU, const Tensor& pivots);

// The gradient of A = P L U with respect to A given those of L and U (PyTorch's
// linalg_lu_backward, square, wide and tall).
Tensor lu_backward(const Tensor& gL, const Tensor& gU, const Tensor& P, const Tensor& L, const Tensor& U);
// The gradient of X = pinv(A) with respect to A (PyTorch's pinv_backward).
Tensor pinv_backward(const Tensor& g, const Tensor& pinvA, const Tensor& A);

}  // namespace kiln::autograd::la
