// Matrix products with torch.matmul's rules: matmul, mm, bmm, mv, dot.
//
// Both operands must have the same dtype (no promotion, as in PyTorch). Supported:
//   float32, float64, complex64, complex128   OpenBLAS (sgemm/dgemm/cgemm/zgemm, gemv
//                                             for a single row or column)
//   float16, bfloat16                         widened to float32, OpenBLAS sgemm with
//                                             float32 accumulation, rounded once to the
//                                             input dtype
//   int8..int64, uint8..uint64                exact integer loop; the result wraps like
//                                             PyTorch's (two's complement)
//   bool, float8_*                            Type error (fp8 products go through scaled_mm)
// A contraction length K = 0 gives zeros.
#pragma once

#include "kiln/tensor.h"

namespace kiln {

// torch.matmul:
//   1-D @ 1-D  -> 0-dim dot product
//   2-D @ 2-D  -> mm
//   1-D @ 2-D  -> [1, K] @ [K, N] with the prepended dim removed: [N]
//   2-D @ 1-D  -> mv: [M]
//   N-D @ N-D  -> batched: batch dims (all but the last two) broadcast; a 1-D operand
//                 is treated as [1, K] (left) or [K, 1] (right) and that dim removed.
Tensor matmul(const Tensor& a, const Tensor& b);
// torch.mm: [M, K] @ [K, N] -> [M, N]; both 2-D.
Tensor mm(const Tensor& a, const Tensor& b);
// torch.bmm: [B, M, K] @ [B, K, N] -> [B, M, N]; both 3-D with equal B (no broadcasting).
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.mv: [M, K] @ [K] -> [M].
Tensor mv(const Tensor& a, const Tensor& v);
// torch.dot: [K] . [K] -> 0-dim (no complex conjugation, as torch.dot).
Tensor dot(const Tensor& a, const Tensor& b);

}  // namespace kiln
