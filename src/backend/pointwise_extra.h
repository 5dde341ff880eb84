// The pointwise_extra family of the kernel table: frexp and the Laguerre polynomials
// (front end: src/ops/pointwise_extra.cpp). Inputs and outputs are contiguous and
// equally long; the front end materialises broadcasts.
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// mantissa (dtype) and exponent (int32) with input = mantissa * 2^exponent, |mantissa|
// in [0.5, 1) for finite non-zero input; C's frexp for 0, inf and NaN. float32/float64.
struct FrexpProblem {
  DType dtype;
  int64_t numel;
  const void* input;
  void* mantissa;
  int32_t* exponent;
};

// out = L_n(x) with n truncated to an integer (x, n, out of dtype float32/float64).
struct LaguerreProblem {
  DType dtype;
  int64_t numel;
  const void* x;
  const void* n;
  void* out;
};

struct PointwiseExtraKernels {
  void (*frexp)(const ExecutionContext& ctx, const FrexpProblem& p) = nullptr;
  void (*laguerre_polynomial_l)(const ExecutionContext& ctx, const LaguerreProblem& p) = nullptr;
};

inline KernelTable<PointwiseExtraKernels> pointwise_extra_kernels{"pointwise_extra"};

}  // namespace kiln::backend
