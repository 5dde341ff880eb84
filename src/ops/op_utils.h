// Small helpers shared by the op front ends (internal).
#pragma once

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {

// The dtype arithmetic runs in: narrow floats (f16, bf16, fp8) widen to float32
// ("compute wide, store narrow"); everything else computes in itself.
inline DType compute_dtype(DType t) { return is_reduced_float(t) ? DType::Float32 : t; }

// The dtype a float-valued op (sqrt, exp, true division, mean, ...) returns for
// input dtype t: integers and bool give the default float dtype (float32).
inline DType float_result_dtype(DType t) {
  return is_floating(t) || is_complex(t) ? t : DType::Float32;
}

inline void check_defined(const Tensor& t, const char* op, const char* name) {
  KILN_CHECK(t.defined(), op, "argument '{}' is an undefined tensor", name);
}

}  // namespace kiln
