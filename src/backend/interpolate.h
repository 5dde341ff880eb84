// The interpolate family of the kernel table: resampling of [planes, D, H, W] arrays
// (front end: src/ops/interpolate.cpp), forward and its exact adjoint.
//
// Resampling is separable: along each spatial axis an output position reads one source
// (nearest modes) or two with weights (linear modes), and the front end resolves those
// taps once per call with PyTorch's index formulas. The backward is a gather: each
// input-gradient element sums the output gradients it contributed to, in a fixed order,
// so the result is deterministic and needs no atomics.
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// The taps of one axis: output position o reads source index0[o] with weight0[o] and,
// for linear modes, index1[o] with weight1[o] (index1 may equal index0). Host arrays of
// `out` entries; indices lie in [0, in).
struct ResampleAxis {
  int64_t in = 1;
  int64_t out = 1;
  const int64_t* index0 = nullptr;
  const int64_t* index1 = nullptr;  // null for the nearest modes
  const double* weight0 = nullptr;  // null for the nearest modes (weight 1)
  const double* weight1 = nullptr;
};

// Forward: `src` is the input [planes, D.in, H.in, W.in] and `dst` the output
// [planes, D.out, H.out, W.out]. Backward: `src` is the output gradient [planes, D.out,
// H.out, W.out] and `dst` the input gradient [planes, D.in, H.in, W.in]. Both arrays are
// row-major and of `dtype` (float32, float64, bfloat16, float16; the narrow ones are
// computed in float32, float64 in float64). Unused leading axes have in = out = 1.
struct ResampleProblem {
  DType dtype;
  int64_t planes;
  ResampleAxis axes[3];  // D, H, W
  const void* src;
  void* dst;
};

struct InterpolateKernels {
  void (*forward)(const ExecutionContext& ctx, const ResampleProblem& p) = nullptr;
  void (*backward)(const ExecutionContext& ctx, const ResampleProblem& p) = nullptr;
};

inline KernelTable<InterpolateKernels> interpolate_kernels{"interpolate"};

}  // namespace kiln::backend
