// The index_extra family of the kernel table: take, put_ and bincount (front end:
// src/ops/index_extra.cpp). Tensors are contiguous; indices int64.
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

// out[i] = input[index[i]] over `count` indices into `numel` elements of `itemsize`
// bytes; negative indices wrap. An index outside [-numel, numel) raises IndexError
// "out of range: tried to access index i on a tensor of n elements." (op names the op).
struct TakeProblem {
  const char* op;
  size_t itemsize;
  int64_t numel;
  const void* input;
  int64_t count;
  const int64_t* index;
  void* out;
};

// self[index[i]] = source[i] (indices checked and wrapped as take; duplicates: the
// last write wins here, which PyTorch leaves undefined).
struct PutProblem {
  size_t itemsize;
  int64_t numel;
  void* self;
  int64_t count;
  const int64_t* index;
  const void* source;
};

// out[input[i]] += weights ? weights[i] : 1 for `count` non-negative int64 inputs, all
// below `bins`. out: int64 without weights; float32 or float64 (weights' dtype).
// Per-thread histograms merged once (no atomics): a hot bin costs nothing extra.
struct BincountProblem {
  int64_t count;
  const int64_t* input;
  DType weight_dtype;  // Float32 / Float64; ignored without weights
  const void* weights;
  int64_t bins;
  void* out;
};

// bincount in one pass over the input, the value range found while counting: the
// kernel counts into histograms of its own that grow with the largest value seen, then
// calls allocate(allocate_state, bins) with bins = max(largest + 1, minlength) for a
// zeroed output (int64 or the weights' dtype, as BincountProblem) and merges into it.
// Returns false, having called nothing, when one pass does not fit: a negative value
// (the caller's value_range pass names it), or values so large that per-thread
// histograms would outgrow the input (the caller's two-pass path splits bins instead).
struct BincountOnePassProblem {
  int64_t count;  // > 0
  const int64_t* input;
  DType weight_dtype;
  const void* weights;
  int64_t minlength;
  void* (*allocate)(void* allocate_state, int64_t bins);
  void* allocate_state;
};

struct IndexExtraKernels {
  // The smallest and largest of `count` (> 0) int64 values (bincount's first pass).
  void (*value_range)(const ExecutionContext& ctx, const int64_t* values, int64_t count, int64_t* min,
                      int64_t* max) = nullptr;
  void (*take)(const ExecutionContext& ctx, const TakeProblem& p) = nullptr;
  void (*put)(const ExecutionContext& ctx, const PutProblem& p) = nullptr;
  void (*bincount)(const ExecutionContext& ctx, const BincountProblem& p) = nullptr;
  bool (*bincount_one_pass)(const ExecutionContext& ctx, const BincountOnePassProblem& p) = nullptr;
};

inline KernelTable<IndexExtraKernels> index_extra_kernels{"index_extra"};

}  // namespace kiln::backend
