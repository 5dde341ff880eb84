// The one refusal of the adding index ops (scatter_add_, index_add_, index_put_ and
// put_ with accumulate) for fp8: fp8 is a storage format with no arithmetic in the adding
// kernels. The op front ends call it so that the error names the op the caller used; the
// kernels call it again before their dtype switch, which has no fp8 entry.
#pragma once

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

// `refused` is how the message starts: "not implemented", "accumulate is not implemented".
inline void check_addable_dtype(DType dtype, const char* op, const char* refused = "not implemented") {
  KILN_CHECK_KIND(!is_fp8(dtype), Type, op,
                  "{} for {} (fp8 is a storage format: convert to float32 or bfloat16 first)", refused,
                  dtype_name(dtype));
}

}  // namespace kiln
