// Front ends of the statistical reductions: var, std (two-pass blocks combined with
// Chan's update, in float64) and norm (torch.linalg.vector_norm).
//
// Complex input is handled through real views: a complex tensor is a real one with a
// trailing (re, im) dim of size 2. var(z) = var(re) + var(im), and the 2-norm of z is
// the 2-norm of its reals; other norms take |z| first.
#include <cmath>
#include <complex>
#include <limits>

#include "backend/cpu/reduce/reduce_loop.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "kiln/thread_pool.h"
#include "ops/op_utils.h"
#include "ops/reduce_utils.h"

namespace kiln {
namespace {

using cpu::ReduceKind;
using cpu::ReducePartial;

// var, or std with take_sqrt.
Tensor var_std(const Tensor& input, const DimList& dims, double correction, bool keepdim, bool take_sqrt,
               const char* op) {
  check_defined(input, op, "input");
  KILN_CHECK_KIND(is_floating(input.dtype()) || is_complex(input.dtype()), Type, op,
                  "std and var only support floating point and complex dtypes (got {})", dtype_name(input.dtype()));
  const ReduceDims rd = reduce_dims(input, dims, keepdim, op);
  Tensor out = empty(rd.out_shape, to_real(input.dtype()));
  const double divisor = std::max(0.0, static_cast<double>(rd.count) - correction);
  auto finish = [&](double m2) {
    const double v = m2 / divisor;
    return take_sqrt ? std::sqrt(v) : v;
  };
  const cpu::ReduceSpec spec{ReduceKind::MeanM2, {}};
  if (!is_complex(input.dtype())) {
    cpu::reduce_loop(default_thread_pool(), input, rd.reduced, spec,
                     [&](const ReducePartial* p, int64_t first, int64_t n) {
                       double values[256];
                       for (int64_t k0 = 0; k0 < n; k0 += 256) {
                         const int64_t m = std::min<int64_t>(256, n - k0);
                         for (int64_t k = 0; k < m; ++k) values[k] = finish(p[k0 + k].m2);
                         store_values(out, first + k0, m, values);
                       }
                     });
    return out;
  }
  // Outputs of the real view come in (re, im) pairs; the sink may split a pair, so the
  // sums of squared deviations are gathered first.
  std::vector<bool> reduced = rd.reduced;
  reduced.push_back(false);
  std::vector<double> m2(static_cast<size_t>(out.numel() * 2));
  cpu::reduce_loop(default_thread_pool(), view_as_real(input), reduced, spec,
                   [&](const ReducePartial* p, int64_t first, int64_t n) {
                     for (int64_t k = 0; k < n; ++k) m2[first + k] = p[k].m2;
                   });
  std::vector<double> values(static_cast<size_t>(out.numel()));
  for (size_t o = 0; o < values.size(); ++o) values[o] = finish(m2[2 * o] + m2[2 * o + 1]);
  store_values(out, 0, out.numel(), values.data());
  return out;
}

// |z| of a complex tensor, as a contiguous real tensor.
Tensor complex_abs(const Tensor& z) {
  const Tensor zc = z.contiguous();
  Tensor out = empty(z.sizes(), to_real(z.dtype()));
  const int64_t n = z.numel();
  default_thread_pool().parallel_for(n, 1 << 14, [&](int64_t begin, int64_t end) {
    if (z.dtype() == DType::Complex64) {
      const auto* src = zc.data<std::complex<float>>();
      for (int64_t i = begin; i < end; ++i) out.data<float>()[i] = std::abs(src[i]);
    } else {
      const auto* src = zc.data<std::complex<double>>();
      for (int64_t i = begin; i < end; ++i) out.data<double>()[i] = std::abs(src[i]);
    }
  });
  return out;
}

ReduceKind norm_kind(double p) {
  if (p == 2.0) return ReduceKind::SumSquares;
  if (p == 1.0) return ReduceKind::SumAbs;
  if (p == 0.0) return ReduceKind::CountNonZero;
  if (p == std::numeric_limits<double>::infinity()) return ReduceKind::MaxAbs;
  if (p == -std::numeric_limits<double>::infinity()) return ReduceKind::MinAbs;
  return ReduceKind::SumPowAbs;
}

double norm_finish(ReduceKind kind, double p, double v) {
  switch (kind) {
    case ReduceKind::SumSquares: return std::sqrt(v);
    case ReduceKind::SumPowAbs: return std::pow(v, 1.0 / p);
    default: return v;
  }
}

// PyTorch refuses the norms without an identity (inf, and every p < 0) over nothing.
void check_norm_identity(const Tensor& input, const DimList& dims, const ReduceDims& rd, double p) {
  if (input.numel() != 0 || (p >= 0 && p != std::numeric_limits<double>::infinity())) return;
  KILN_CHECK(!dims.empty(), "linalg.vector_norm",
             "cannot compute the {} norm on an empty tensor because the operation does not have an identity", p);
  for (int64_t d = 0; d < input.dim(); ++d) {
    KILN_CHECK(!(rd.reduced[d] && input.sizes()[d] == 0), "linalg.vector_norm",
               "cannot compute the {} norm on the dimension {} because this dimension is empty and the operation "
               "does not have an identity",
               p, d);
  }
}

}  // namespace

Tensor var(const Tensor& input, const DimList& dims, double correction, bool keepdim) {
  return var_std(input, dims, correction, keepdim, false, "var");
}

Tensor std(const Tensor& input, const DimList& dims, double correction, bool keepdim) {
  return var_std(input, dims, correction, keepdim, true, "std");
}

Tensor norm(const Tensor& input, double p, const DimList& dims, bool keepdim) {
  const char* op = "linalg.vector_norm";
  check_defined(input, op, "input");
  KILN_CHECK_KIND(is_floating(input.dtype()) || is_complex(input.dtype()), Type, op,
                  "Expected a floating point or complex tensor as input. Got {}", torch_type_name(input.dtype()));
  const ReduceDims rd = reduce_dims(input, dims, keepdim, op);
  check_norm_identity(input, dims, rd, p);
  const ReduceKind kind = norm_kind(p);
  Tensor src = input;
  std::vector<bool> reduced = rd.reduced;
  if (is_complex(input.dtype())) {
    if (kind == ReduceKind::SumSquares) {
      src = view_as_real(input);
      reduced.push_back(true);
    } else {
      src = complex_abs(input);
    }
  }
  Tensor out = empty(rd.out_shape, to_real(input.dtype()));
  cpu::reduce_loop(default_thread_pool(), src, reduced, {kind, {p}},
                   [&](const ReducePartial* part, int64_t first, int64_t n) {
                     double values[256];
                     for (int64_t k0 = 0; k0 < n; k0 += 256) {
                       const int64_t m = std::min<int64_t>(256, n - k0);
                       for (int64_t k = 0; k < m; ++k) values[k] = norm_finish(kind, p, part[k0 + k].v[0]);
                       store_values(out, first + k0, m, values);
                     }
                   });
  return out;
}

}  // namespace kiln
