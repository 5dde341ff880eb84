// Front ends of the basic reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin,
// and of cumsum.
// Each validates, settles the result dtype and shape, allocates, and runs the reduce
// table's kernel (backend/reduce.h) of the matching kind.
#include <string>

#include "backend/reduce.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "ops/autograd_hooks.h"
#include "ops/op_utils.h"
#include "ops/reduce_utils.h"

namespace kiln {
namespace {

using backend::ReduceKind;

void run_reduce(const char* op, ReduceKind kind, const Tensor& input, const std::vector<bool>& reduced,
                const Tensor& values, const Tensor& indices, double divisor = 1.0) {
  const auto kernel = backend::reduce_kernels.on(input.device(), op).reduce;
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&input, &values}), 0}; });
  kernel(current_context(), {kind, input, reduced, values, indices, divisor});
}

// sum / prod / mean share everything but the kernel and the final division.
Tensor sum_like(const Tensor& input, const DimList& dims, bool keepdim, std::optional<DType> dtype,
                ReduceKind kind, bool divide_by_count, const char* op) {
  const Tensor src = dtype ? input.to(*dtype) : input;
  const DType out_dtype = dtype ? *dtype : (is_integral(src.dtype(), true) ? DType::Int64 : src.dtype());
  const ReduceDims rd = reduce_dims(src, dims, keepdim, op);
  Tensor out = Tensor::empty(rd.out_shape, out_dtype, src.device(), op);
  const double divisor = divide_by_count ? static_cast<double>(rd.count) : 1.0;
  run_reduce(op, kind, src, rd.reduced, out, Tensor(), divisor);
  return out;
}

void check_not_complex(const Tensor& input, const char* op) {
  KILN_CHECK_KIND(!is_complex(input.dtype()), Type, op, "does not support complex input (got {})",
                  dtype_name(input.dtype()));
}

Tensor amax_like(const Tensor& input, const DimList& dims, bool keepdim, ReduceKind kind, const char* op) {
  check_defined(input, op, "input");
  check_not_complex(input, op);
  const ReduceDims rd = reduce_dims(input, dims, keepdim, op);
  check_reduced_dims_nonempty(input, rd, op);
  Tensor out = Tensor::empty(rd.out_shape, input.dtype(), input.device(), op);
  run_reduce(op, kind, input, rd.reduced, out, Tensor());
  return out;
}

Tensor full_extreme(const Tensor& input, ReduceKind kind, const char* op) {
  check_defined(input, op, "input");
  check_not_complex(input, op);
  KILN_CHECK(input.numel() > 0, op,
             "Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the "
             "'dim' argument.");
  Tensor out = Tensor::empty({}, input.dtype(), kCPU, op);
  run_reduce(op, kind, input, std::vector<bool>(static_cast<size_t>(input.dim()), true), out, Tensor());
  return out;
}

ValuesIndices dim_extreme(const Tensor& input, int64_t dim, bool keepdim, ReduceKind kind, const char* op) {
  check_defined(input, op, "input");
  check_not_complex(input, op);
  const ReduceDims rd = reduce_one_dim(input, dim, keepdim, op);
  check_reduced_dims_nonempty(input, rd, op);
  ValuesIndices r{Tensor::empty(rd.out_shape, input.dtype(), kCPU, op),
                  Tensor::empty(rd.out_shape, DType::Int64, kCPU, op)};
  run_reduce(op, kind, input, rd.reduced, r.values, r.indices);
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
  Tensor indices = Tensor::empty(rd.out_shape, DType::Int64, kCPU, op.c_str());
  run_reduce(op.c_str(), kind, input, rd.reduced, Tensor(), indices);
  return indices;
}

}  // namespace

Tensor sum(const Tensor& input, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  KILN_AUTOGRAD(sum, input, dims, keepdim, dtype);
  check_defined(input, "sum", "input");
  return sum_like(input, dims, keepdim, dtype, ReduceKind::Sum, false, "sum");
}

Tensor prod(const Tensor& input, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  KILN_AUTOGRAD(prod, input, dims, keepdim, dtype);
  check_defined(input, "prod", "input");
  return sum_like(input, dims, keepdim, dtype, ReduceKind::Prod, false, "prod");
}

Tensor mean(const Tensor& input, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  KILN_AUTOGRAD(mean, input, dims, keepdim, dtype);
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
  KILN_AUTOGRAD(amax, input, dims, keepdim);
  return amax_like(input, dims, keepdim, ReduceKind::Max, "amax()");
}
Tensor amin(const Tensor& input, const DimList& dims, bool keepdim) {
  KILN_AUTOGRAD(amin, input, dims, keepdim);
  return amax_like(input, dims, keepdim, ReduceKind::Min, "amin()");
}

Tensor max(const Tensor& input) {
  KILN_AUTOGRAD(max_all, input);
  return full_extreme(input, ReduceKind::Max, "max()");
}
Tensor min(const Tensor& input) {
  KILN_AUTOGRAD(min_all, input);
  return full_extreme(input, ReduceKind::Min, "min()");
}

ValuesIndices max(const Tensor& input, int64_t dim, bool keepdim) {
  KILN_AUTOGRAD(max_dim, input, dim, keepdim);
  return dim_extreme(input, dim, keepdim, ReduceKind::ArgMax, "max()");
}
ValuesIndices min(const Tensor& input, int64_t dim, bool keepdim) {
  KILN_AUTOGRAD(min_dim, input, dim, keepdim);
  return dim_extreme(input, dim, keepdim, ReduceKind::ArgMin, "min()");
}

Tensor argmax(const Tensor& input, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(input, dim, keepdim, ReduceKind::ArgMax, "argmax");
}
Tensor argmin(const Tensor& input, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(input, dim, keepdim, ReduceKind::ArgMin, "argmin");
}

Tensor cumsum(const Tensor& input, int64_t dim, std::optional<DType> dtype) {
  KILN_AUTOGRAD(cumsum, input, dim, dtype);
  check_defined(input, "cumsum", "input");
  const int64_t d = wrap_dim(dim, input.dim(), "cumsum");
  const DType out_dtype = dtype ? *dtype : (is_integral(input.dtype(), true) ? DType::Int64 : input.dtype());
  // A 0-dim input scans as a line of one.
  const Tensor line = input.dim() == 0 ? input.reshape({1}) : input;
  // The output first: an input too large to hold is refused as cumsum's output.
  Tensor out = Tensor::empty(line.sizes(), out_dtype, kCPU, "cumsum");
  const Tensor src = (dtype ? line.to(*dtype) : line).contiguous();
  const auto kernel = backend::reduce_kernels.on(src.device(), "cumsum").cumsum;
  kernel(current_context(), {src, d, out});
  return input.dim() == 0 ? out.reshape({}) : out;
}

}  // namespace kiln
