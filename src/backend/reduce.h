// The reduce family of the kernel table: sum/prod/mean, max/min and the arg ops,
// var/std, vector norms, and cumsum (front ends: src/ops/reduce.cpp, reduce_stats.cpp).
//
// A reduction runs over the input dims with reduced[d] (reduced.size() == input.dim())
// and writes one value per combination of the kept dims, in row-major order, into a
// contiguous output of any dtype. Results do not depend on the thread count (only on
// the shape and strides). A reduction over no elements gives the kind's identity (sum
// 0, prod 1); the front ends reject the kinds that have none.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/tensor.h"

namespace kiln::backend {

enum class ReduceKind : uint8_t {
  Sum,
  Prod,
  Max,           // NaN wins
  Min,
  ArgMax,        // NaN wins; the first index among equal values
  ArgMin,
  SumAbs,        // norm p = 1
  SumSquares,    // norm p = 2
  CountNonZero,  // norm p = 0
  MaxAbs,        // norm p = inf
  MinAbs,        // norm p = -inf
  SumPowAbs,     // norm, any other p: sum |x|^p
  MeanM2,        // var/std: count, mean and sum of squared deviations
};

// The op a kind computes, as its front ends are called: kernels name it in errors.
constexpr const char* reduce_kind_name(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum: return "sum";
    case ReduceKind::Prod: return "prod";
    case ReduceKind::Max: return "max";
    case ReduceKind::Min: return "min";
    case ReduceKind::ArgMax: return "argmax";
    case ReduceKind::ArgMin: return "argmin";
    case ReduceKind::SumAbs: return "norm (p = 1)";
    case ReduceKind::SumSquares: return "norm (p = 2)";
    case ReduceKind::CountNonZero: return "norm (p = 0)";
    case ReduceKind::MaxAbs: return "norm (p = inf)";
    case ReduceKind::MinAbs: return "norm (p = -inf)";
    case ReduceKind::SumPowAbs: return "norm";
    case ReduceKind::MeanM2: return "var/std";
  }
  return "reduce";
}

// kind is Sum, Prod, Max, Min, ArgMax or ArgMin. Sums are divided by `divisor` (mean:
// the count). The arg kinds write to `indices` (int64) the row-major flat index over
// the reduced dims, and their value to `values`; either output may be undefined.
struct ReduceProblem {
  ReduceKind kind;
  const Tensor& input;
  const std::vector<bool>& reduced;
  const Tensor& values;
  const Tensor& indices;
  double divisor;
};

// var (or std, with take_sqrt) of a floating or complex input: the sum of squared
// deviations divided by `divisor` (count - correction, at least 0), computed in float64
// from two-pass blocks combined with Chan's update. Complex: var(re) + var(im).
struct VarianceProblem {
  const Tensor& input;
  const std::vector<bool>& reduced;
  double divisor;
  bool take_sqrt;
  const Tensor& out;
};

// torch.linalg.vector_norm of order p of a floating or complex input (complex: of |z|).
struct VectorNormProblem {
  const Tensor& input;
  const std::vector<bool>& reduced;
  double p;
  const Tensor& out;
};

// out[..., i, ...] = sum of input[..., 0..i, ...] along `dim` (wrapped). `input` is
// contiguous; `out` is contiguous with the same shape and any dtype. The running sums
// are int64 (bool and integers, wrapping), double (floats) or complex<double>.
struct CumsumProblem {
  const Tensor& input;
  int64_t dim;
  const Tensor& out;
};

struct ReduceKernels {
  void (*reduce)(const ExecutionContext& ctx, const ReduceProblem& p) = nullptr;
  void (*variance)(const ExecutionContext& ctx, const VarianceProblem& p) = nullptr;
  void (*vector_norm)(const ExecutionContext& ctx, const VectorNormProblem& p) = nullptr;
  void (*cumsum)(const ExecutionContext& ctx, const CumsumProblem& p) = nullptr;
};

inline KernelTable<ReduceKernels> reduce_kernels{"reduce"};

}  // namespace kiln::backend
