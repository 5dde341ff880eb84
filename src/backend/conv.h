// The conv family of the kernel table: N-d convolution forward, and its two adjoints,
// the input gradient (which is also conv_transpose's forward) and the weight gradient
// (front end: src/ops/conv.cpp).
//
// Every problem is described in three spatial dims (D, H, W); conv1d and conv2d pass
// size-1 leading dims with kernel 1, stride 1, padding 0 and dilation 1. Activations and
// weights are dense, in one of two layouts:
//   contiguous:    activations [N, C, D, H, W], weight [O, C / groups, kd, kh, kw]
//   channels_last: activations [N, D, H, W, C], weight [O, kd, kh, kw, C / groups]
// (the memory order of PyTorch's channels_last / channels_last_3d tensors). Output
// position p reads input position p * stride + k * dilation - padding for kernel tap k;
// positions outside the input read zero.
#pragma once

#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"

namespace kiln::backend {

struct ConvGeometry {
  DType dtype = DType::Float32;  // Float32 or Float64 (narrow floats are widened by the front end)
  bool channels_last = false;
  int64_t batch = 0, in_channels = 0, out_channels = 0, groups = 1;
  int64_t in[3] = {1, 1, 1};       // input spatial sizes
  int64_t out[3] = {1, 1, 1};      // output spatial sizes
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t padding[3] = {0, 0, 0};  // zeros before the input (after it only shapes `out`)
  int64_t dilation[3] = {1, 1, 1};
};

// output = conv(input, weight) + bias (bias: out_channels values, or null).
struct ConvForwardArgs {
  ConvGeometry g;
  const void* input;
  const void* weight;
  const void* bias;
  void* output;
};

// grad_input = conv^T(grad_output, weight): every grad_input element is written once.
struct ConvInputGradArgs {
  ConvGeometry g;
  const void* grad_output;
  const void* weight;
  void* grad_input;
};

// grad_weight = sum over the batch and output positions of grad_output x input windows,
// in the weight layout of g.channels_last; overwritten, not accumulated.
struct ConvWeightGradArgs {
  ConvGeometry g;
  const void* input;
  const void* grad_output;
  void* grad_weight;
};

struct ConvKernels {
  void (*forward)(const ExecutionContext& ctx, const ConvForwardArgs& a) = nullptr;
  void (*input_grad)(const ExecutionContext& ctx, const ConvInputGradArgs& a) = nullptr;
  void (*weight_grad)(const ExecutionContext& ctx, const ConvWeightGradArgs& a) = nullptr;
};
inline KernelTable<ConvKernels> conv_kernels{"conv"};

}  // namespace kiln::backend
