// isclose, allclose and equal, written with the elementwise ops and reductions the way
// PyTorch's composite implementations are (aten/src/ATen/native/TensorCompare.cpp), so
// the dtype of every intermediate is PyTorch's.
#include "kiln/error.h"
#include "kiln/ops/compare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduce.h"
#include "ops/op_utils.h"

namespace kiln {

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  check_defined(a, "isclose", "input");
  check_defined(b, "isclose", "other");
  KILN_CHECK(a.dtype() == b.dtype(), "isclose", "{} did not match {}", torch_type_name(a.dtype()),
             torch_type_name(b.dtype()));
  // NaN fails both tests, as in PyTorch.
  KILN_CHECK(rtol >= 0, "isclose", "rtol must be greater than or equal to zero, but got {}", rtol);
  KILN_CHECK(atol >= 0, "isclose", "atol must be greater than or equal to zero, but got {}", atol);
  Tensor close = eq(a, b);  // inf == inf, which the error test below cannot see
  const bool floating = is_floating(a.dtype()) || is_complex(a.dtype());
  if (equal_nan && floating) close = logical_or(close, logical_and(isnan(a), isnan(b)));
  // Zero tolerances degenerate to equality; the error test would call inf and inf + 1 close.
  if (rtol == 0 && atol == 0) return close;
  // Integers and bool compute in float32, so a uint8 difference cannot wrap.
  const Tensor self = a.dtype() == DType::Bool ? a.to(DType::Float32) : a;
  const Tensor other = floating ? b : b.to(DType::Float32);
  const Tensor allowed = add(abs(mul(other, Scalar(rtol))), Scalar(atol));
  const Tensor actual = abs(sub(self, other));
  return logical_or(close, logical_and(isfinite(actual), le(actual, allowed)));
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  const Tensor close = isclose(a, b, rtol, atol, equal_nan);
  // all(close): no element false (true for an empty result).
  return sum(logical_not(close)).item().to_int64() == 0;
}

bool equal(const Tensor& a, const Tensor& b) {
  check_defined(a, "equal", "input");
  check_defined(b, "equal", "other");
  KILN_CHECK(a.device() == b.device(), "equal", "Cannot compare two tensors on different devices. Got: {} and {}",
             a.device().str(), b.device().str());
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  return sum(ne(a, b)).item().to_int64() == 0;
}

}  // namespace kiln
