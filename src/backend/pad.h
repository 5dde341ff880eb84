// The pad family of the kernel table: constant padding written in one pass (front end:
// src/ops/pad.cpp). Every output element is written once, either with the fill value
// or with the input element it maps to; nothing is written twice and nothing temporary
// is allocated, so repeated calls reuse one cached output block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"

namespace kiln::backend {

inline constexpr int kMaxPadDims = 16;

// `out` is dense and row-major over `ndim` dims of `out_sizes` (the front end permutes
// dims so that a channels-last output is row-major here). Along dim d, output positions
// [begin[d], begin[d] + length[d]) hold the input; the rest hold `fill` (itemsize bytes).
// `in` points at the input element that lands at (begin[0], begin[1], ...), walked with
// `in_strides` (elements; any sign-free strides: slices and permutations). When any
// length is 0 the whole output is fill.
struct ConstantPadProblem {
  size_t itemsize;
  int ndim;
  int64_t out_sizes[kMaxPadDims];
  int64_t begin[kMaxPadDims];
  int64_t length[kMaxPadDims];
  int64_t in_strides[kMaxPadDims];
  const void* in;
  void* out;
  const void* fill;
};

struct PadKernels {
  void (*constant)(const ExecutionContext& ctx, const ConstantPadProblem& p) = nullptr;
};

inline KernelTable<PadKernels> pad_kernels{"pad"};

}  // namespace kiln::backend
