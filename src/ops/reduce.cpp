// Front ends of the basic reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin,
// and of cumsum.
// Each validates, settles the result dtype and shape, and runs cpu::reduce_loop with
// the matching kernel kind; the sink turns each output's partial into its value.
#include <string>

#include "backend/cpu/reduce/reduce_loop.h"
#include "backend/cpu/reduce/scan_kernels.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "kiln/thread_pool.h"
#include "ops/op_utils.h"
#include "ops/reduce_utils.h"

namespace kiln {
namespace {

using cpu::ReduceKind;
using cpu::ReducePartial;

// sum / prod / mean share everything but the kernel and the final division.
Tensor sum_like(const Tensor& input, const DimList& dims, bool keepdim, std::optional<DType> dtype,
                ReduceKind kind, bool divide_by_count, const char* op) {
  const Tensor src = dtype ? input.to(*dtype) : input;
  const DType out_dtype = dtype ? *dtype : (is_integral(src.dtype(), true) ? DType::Int64 : src.dtype());
  const ReduceDims rd = reduce_dims(src, dims, keepdim, op);
  Tensor out = empty(rd.out_shape, out_dtype);
  const PartialValue value = partial_value_of(src.dtype());
  const double divisor = divide_by_count ? static_cast<double>(rd.count) : 1.0;
  cpu::reduce_loop(default_thread_pool(), src, rd.reduced, {kind, {}},
                   [&](const ReducePartial* p, int64_t first, int64_t n) {
                     store_partial_values(out, value, p, first, n, divisor);
                   });
  return out;
}

void check_not_complex(const Tensor& input, const char* op) {
  KILN_CHECK_KIND(!is_complex(input.dtype()), Type, op, "does not support complex input (got {})",
                  dtype_name(input.dtype()));
}

// The reduced values (and, for the arg kinds, their indices) into the given outputs;
// either may be undefined.
void extreme_into(const Tensor& input, const std::vector<bool>& reduced, ReduceKind kind, const Tensor& values,
                  const Tensor& indices) {
  const PartialValue value = partial_value_of(input.dtype());
  cpu::reduce_loop(default_thread_pool(), input, reduced, {kind, {}},
                   [&](const ReducePartial* p, int64_t first, int64_t n) {
                     if (values.defined()) store_partial_values(values, value, p, first, n);
                     if (!indices.defined()) return;
                     int64_t* out = indices.data<int64_t>() + first;
                     for (int64_t k = 0; k < n; ++k) out[k] = p[k].index;
                   });
}

Tensor amax_like(const Tensor& input, const DimList& dims, bool keepdim, ReduceKind kind, const char* op) {
  check_defined(input, op, "input");
  check_not_complex(input, op);
  const ReduceDims rd = reduce_dims(input, dims, keepdim, op);
  check_reduced_dims_nonempty(input, rd, op);
  Tensor out = empty(rd.out_shape, input.dtype());
  extreme_into(input, rd.reduced, kind, out, Tensor());
  return out;
}

Tensor full_extreme(const Tensor& input, ReduceKind kind, const char* op) {
  check_defined(input, op, "input");
  check_not_complex(input, op);
  KILN_CHECK(input.numel() > 0, op,
             "Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the "
             "'dim' argument.");
  Tensor out = empty({}, input.dtype());
  extreme_into(input, std::vector<bool>(static_cast<size_t>(input.dim()), true), kind, out, Tensor());
  return out;
}

ValuesIndices dim_extreme(const Tensor& input, int64_t dim, bool keepdim, ReduceKind kind, const char* op) {
  check_defined(input, op, "input");
  check_not_complex(input, op);
  const ReduceDims rd = reduce_one_dim(input, dim, keepdim, op);
  check_reduced_dims_nonempty(input, rd, op);
  ValuesIndices r{empty(rd.out_shape, input.dtype()), empty(rd.out_shape, DType::Int64)};
  extreme_into(input, rd.reduced, kind, r.values, r.indices);
  return r;
}

Tensor arg_extreme(const Tensor& input, std::optional<int64_t> dim, bool keepdim, ReduceKind kind,
                   const char* name) {
  const std::string op = std::string(name) + "()";
  check_defined(input, op.c_str(), "input");
  check_not_complex(input, op.c_str());
  ReduceDims rd;
  if (dim) {
    rd = reduce_one_dim(input, *dim, keepdim, op.c_str());
    check_reduced_dims_nonempty(input, rd, op.c_str());
  } else {
    KILN_CHECK(input.numel() > 0, name,
               "cannot perform reduction function {} on a tensor with no elements because the operation does not "
               "have an identity",
               name);
    rd = reduce_dims(input, {}, keepdim, op.c_str());
  }
  Tensor indices = empty(rd.out_shape, DType::Int64);
  extreme_into(input, rd.reduced, kind, Tensor(), indices);
  return indices;
}

}  // namespace

Tensor sum(const Tensor& input, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  check_defined(input, "sum", "input");
  return sum_like(input, dims, keepdim, dtype, ReduceKind::Sum, false, "sum");
}

Tensor prod(const Tensor& input, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  check_defined(input, "prod", "input");
  return sum_like(input, dims, keepdim, dtype, ReduceKind::Prod, false, "prod");
}

Tensor mean(const Tensor& input, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  check_defined(input, "mean", "input");
  if (dtype) {
    KILN_CHECK_KIND(is_floating(*dtype) || is_complex(*dtype), Type, "mean()",
                    "could not infer output dtype. Optional dtype must be either a floating point or complex "
                    "dtype. Got: {}",
                    torch_type_name(*dtype));
  } else {
    KILN_CHECK_KIND(is_floating(input.dtype()) || is_complex(input.dtype()), Type, "mean()",
                    "could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
                    "Got: {}",
                    torch_type_name(input.dtype()));
  }
  return sum_like(input, dims, keepdim, dtype, ReduceKind::Sum, true, "mean");
}

Tensor amax(const Tensor& input, const DimList& dims, bool keepdim) {
  return amax_like(input, dims, keepdim, ReduceKind::Max, "amax()");
}
Tensor amin(const Tensor& input, const DimList& dims, bool keepdim) {
  return amax_like(input, dims, keepdim, ReduceKind::Min, "amin()");
}

Tensor max(const Tensor& input) { return full_extreme(input, ReduceKind::Max, "max()"); }
Tensor min(const Tensor& input) { return full_extreme(input, ReduceKind::Min, "min()"); }

ValuesIndices max(const Tensor& input, int64_t dim, bool keepdim) {
  return dim_extreme(input, dim, keepdim, ReduceKind::ArgMax, "max()");
}
ValuesIndices min(const Tensor& input, int64_t dim, bool keepdim) {
  return dim_extreme(input, dim, keepdim, ReduceKind::ArgMin, "min()");
}

Tensor argmax(const Tensor& input, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(input, dim, keepdim, ReduceKind::ArgMax, "argmax");
}
Tensor argmin(const Tensor& input, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(input, dim, keepdim, ReduceKind::ArgMin, "argmin");
}

Tensor cumsum(const Tensor& input, int64_t dim, std::optional<DType> dtype) {
  check_defined(input, "cumsum", "input");
  const int64_t d = wrap_dim(dim, input.dim(), "cumsum");
  const DType out_dtype = dtype ? *dtype : (is_integral(input.dtype(), true) ? DType::Int64 : input.dtype());
  // A 0-dim input scans as a line of one.
  const Tensor line = input.dim() == 0 ? input.reshape({1}) : input;
  const Tensor src = (dtype ? line.to(*dtype) : line).contiguous();
  Tensor out = empty(line.sizes(), out_dtype);
  cpu::cumsum_kernel(default_thread_pool(), src, d, out);
  return input.dim() == 0 ? out.reshape({}) : out;
}

}  // namespace kiln
