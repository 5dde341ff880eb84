// Memory-overlap checks for ops that write a tensor (internal; PyTorch's
// assert_no_internal_overlap / assert_no_partial_overlap / assert_no_overlap): a write
// whose result would depend on the order elements are written in is refused.
#pragma once

#include "kiln/tensor.h"

namespace kiln {

// `t` has a dim of size > 1 with stride 0 (an expanded view): writing it would write one
// memory location several times.
void check_no_internal_overlap(const Tensor& t, const char* op);
// `written` and `read` share memory without being the very same view.
void check_no_partial_overlap(const Tensor& written, const Tensor& read, const char* op);
// `written` and `read` share any memory at all.
void check_no_overlap(const Tensor& written, const Tensor& read, const char* op);

}  // namespace kiln
