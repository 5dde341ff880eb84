// Memory formats and stride propagation (internal; the public side is MemoryFormat and
// the Tensor methods in kiln/tensor.h). PyTorch's rules, so that a channels-last tensor
// stays channels-last through copies and elementwise ops exactly as it does there.
#pragma once

#include <initializer_list>
#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// The strides a new tensor of `sizes` gets in `memory_format` (not Preserve): PyTorch's
// contiguous strides, or get_channels_last_strides_2d/3d. The wrong rank is PyTorch's
// "required rank 4 tensor to use channels_last format"; strides that do not fit in
// int64 are an error naming `op`.
Shape strides_for_memory_format(const Shape& sizes, MemoryFormat memory_format, const char* op);

// PyTorch's infer_dense_strides: dense strides that walk the dims in the order the
// given strides do (stride-0 dims stay where they are). For Preserve of a tensor that
// is not dense (a slice, a transposed expand).
Shape dense_strides_like(const Shape& sizes, const Shape& strides);

// The strides PyTorch's TensorIterator gives the output of an elementwise op over
// `inputs` (each already expanded to `shape`, so broadcast dims have stride 0), or
// nothing when that is row-major. Every input contiguous (the hot path) answers at once;
// else inputs of `shape` that are all channels-last, or all dense with one set of
// strides, give those strides, and any other mix orders the output's dims as the inputs'
// strides do, the first input deciding ties (TensorIterator's reorder_dimensions).
std::optional<Shape> elementwise_output_strides(const Shape& shape, std::initializer_list<const Tensor*> inputs);

// The dims of `t` from the outermost in memory to the innermost (stride descending, ties
// in dim order): permuted so, a dense tensor is row-major.
Shape dims_by_memory_order(const Tensor& t);

// A new tensor for an elementwise result: row-major unless elementwise_output_strides
// says otherwise.
Tensor empty_elementwise_output(const Shape& shape, DType dtype, Device device,
                                std::initializer_list<const Tensor*> inputs, const char* op);

// Memory for a copy of `t` in `memory_format`, uninitialised (PyTorch's empty_like).
Tensor empty_like_format(const Tensor& t, MemoryFormat memory_format, DType dtype, const char* op);

}  // namespace kiln
