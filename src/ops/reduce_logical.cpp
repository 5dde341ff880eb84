// any and all: a count of the nonzero (or zero) elements over the reduced dims, compared
// with zero. The count is an int64 sum, so an empty reduction needs no special case.
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "ops/op_utils.h"

namespace kiln {
namespace {

Tensor as_logical_result(const Tensor& flags, DType input_dtype) {
  return input_dtype == DType::UInt8 ? flags.to(DType::UInt8) : flags;
}

}  // namespace

Tensor any(const Tensor& input, const DimList& dims, bool keepdim) {
  check_defined(input, "any", "input");
  const Tensor nonzero_count = sum(ne(input.detach(), Scalar(int64_t{0})), dims, keepdim);
  return as_logical_result(gt(nonzero_count, Scalar(int64_t{0})), input.dtype());
}

Tensor all(const Tensor& input, const DimList& dims, bool keepdim) {
  check_defined(input, "all", "input");
  const Tensor zero_count = sum(logical_not(input.detach()), dims, keepdim);
  return as_logical_result(eq(zero_count, Scalar(int64_t{0})), input.dtype());
}

}  // namespace kiln
