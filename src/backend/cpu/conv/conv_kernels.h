// The CPU conv kernels (backend/conv.h), float32 and float64.
//
// conv_*_cpu dispatch on the dtype and pick the path: the direct depthwise loops for a
// depthwise problem (groups == in_channels > 1; the hybrid models' short causal
// convolutions, MobileNet-style blocks), else tiled im2col + OpenBLAS GEMM. Both paths write every
// output element from one task, so results do not depend on scheduling; the weight
// gradient sums per-chunk partials in chunk order.
#pragma once

#include "backend/conv.h"

namespace kiln::cpu {

void conv_forward_cpu(const ExecutionContext& ctx, const backend::ConvForwardArgs& a);
void conv_input_grad_cpu(const ExecutionContext& ctx, const backend::ConvInputGradArgs& a);
void conv_weight_grad_cpu(const ExecutionContext& ctx, const backend::ConvWeightGradArgs& a);

// The GEMM path (any geometry, either layout).
void conv_gemm_forward(const ExecutionContext& ctx, const backend::ConvForwardArgs& a);
void conv_gemm_input_grad(const ExecutionContext& ctx, const backend::ConvInputGradArgs& a);
void conv_gemm_weight_grad(const ExecutionContext& ctx, const backend::ConvWeightGradArgs& a);

// The direct depthwise paths (groups == in_channels > 1): loops along the spatial rows
// for the contiguous layout, along the channels for channels-last.
bool is_depthwise_direct(const backend::ConvGeometry& g);
void conv_depthwise_forward(const ExecutionContext& ctx, const backend::ConvForwardArgs& a);
void conv_depthwise_input_grad(const ExecutionContext& ctx, const backend::ConvInputGradArgs& a);
void conv_depthwise_weight_grad(const ExecutionContext& ctx, const backend::ConvWeightGradArgs& a);
void conv_depthwise_cl_forward(const ExecutionContext& ctx, const backend::ConvForwardArgs& a);
void conv_depthwise_cl_input_grad(const ExecutionContext& ctx, const backend::ConvInputGradArgs& a);
void conv_depthwise_cl_weight_grad(const ExecutionContext& ctx, const backend::ConvWeightGradArgs& a);

}  // namespace kiln::cpu
