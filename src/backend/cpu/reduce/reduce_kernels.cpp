// The reduction kernel table: picks the kernel for a (kind, compute dtype) pair, and
// holds what is not SIMD: the partial-combining rules, the complex kernels (sums reuse
// the float SIMD kernels on interleaved reals; products are scalar) and norms with a
// general p (pow is not vectorised).
#include <cmath>
#include <complex>
#include <cstdint>

#include "backend/cpu/reduce/reduce_kernels.h"
#include "kiln/error.h"

namespace kiln::cpu {

// ---- combining partials (acc covers earlier elements than next) ----
void combine_sum(ReducePartial* acc, const ReducePartial& next) {
  acc->v[0] += next.v[0];
  acc->v[1] += next.v[1];
}

void combine_prod_real(ReducePartial* acc, const ReducePartial& next) { acc->v[0] *= next.v[0]; }

namespace {
void combine_prod_complex(ReducePartial* acc, const ReducePartial& next) {
  const std::complex<double> z = std::complex<double>(acc->v[0], acc->v[1]) * std::complex<double>(next.v[0], next.v[1]);
  acc->v[0] = z.real();
  acc->v[1] = z.imag();
}

// NaN wins; otherwise the strictly better value.
template <bool kMax>
bool next_wins(double acc, double next) {
  if (std::isnan(acc)) return false;
  return std::isnan(next) || (kMax ? next > acc : next < acc);
}
}  // namespace

void combine_max(ReducePartial* acc, const ReducePartial& next) {
  if (next_wins<true>(acc->v[0], next.v[0])) acc->v[0] = next.v[0];
}
void combine_min(ReducePartial* acc, const ReducePartial& next) {
  if (next_wins<false>(acc->v[0], next.v[0])) acc->v[0] = next.v[0];
}
void combine_argmax(ReducePartial* acc, const ReducePartial& next) {
  if (next_wins<true>(acc->v[0], next.v[0])) *acc = next;
}
void combine_argmin(ReducePartial* acc, const ReducePartial& next) {
  if (next_wins<false>(acc->v[0], next.v[0])) *acc = next;
}

// Chan et al.'s pairwise update of (count, mean, M2).
void combine_mean_m2(ReducePartial* acc, const ReducePartial& next) {
  if (next.count == 0) return;
  if (acc->count == 0) {
    *acc = next;
    return;
  }
  const double na = static_cast<double>(acc->count);
  const double nb = static_cast<double>(next.count);
  const double n = na + nb;
  const double delta = next.v[0] - acc->v[0];
  acc->v[0] += delta * (nb / n);
  acc->m2 += next.m2 + delta * delta * (na * nb / n);
  acc->count += next.count;
}

namespace {

// ---- complex: sums through the float kernels, products in complex<double> ----
template <class R>
void complex_row_sum(const void* x, int64_t n, int64_t, const ReduceParams&, ReducePartial* out) {
  if constexpr (sizeof(R) == 4) {
    sum_pairs_row_f32(static_cast<const float*>(x), 2 * n, out);
  } else {
    sum_pairs_row_f64(static_cast<const double*>(x), 2 * n, out);
  }
}

// A block of w complex columns is a block of 2w real columns.
template <class R>
void complex_column_sum(const void* const* rows, int64_t nrows, int64_t w, int64_t index0,
                        const ReduceParams& params, ReducePartial* out) {
  KILN_CHECK(w <= kColumnBlockWidth, "reduce", "complex column block of {} is too wide", w);
  const ReduceKernel real = sizeof(R) == 4 ? reduce_sum_kernels_f32(ReduceKind::Sum)
                                           : reduce_sum_kernels_f64(ReduceKind::Sum);
  ReducePartial reals[2 * kColumnBlockWidth];
  real.column(rows, nrows, 2 * w, index0, params, reals);
  for (int64_t j = 0; j < w; ++j) {
    out[j] = ReducePartial{};
    out[j].v[0] = reals[2 * j].v[0];
    out[j].v[1] = reals[2 * j + 1].v[0];
  }
}

template <class R>
void complex_row_prod(const void* xv, int64_t n, int64_t, const ReduceParams&, ReducePartial* out) {
  const std::complex<R>* x = static_cast<const std::complex<R>*>(xv);
  std::complex<double> acc(1.0, 0.0);
  for (int64_t i = 0; i < n; ++i) acc *= std::complex<double>(x[i]);
  *out = ReducePartial{};
  out->v[0] = acc.real();
  out->v[1] = acc.imag();
}

template <class R>
void complex_column_prod(const void* const* rows_v, int64_t nrows, int64_t w, int64_t, const ReduceParams&,
                         ReducePartial* out) {
  const std::complex<R>* const* rows = reinterpret_cast<const std::complex<R>* const*>(rows_v);
  for (int64_t j = 0; j < w; ++j) {
    std::complex<double> acc(1.0, 0.0);
    for (int64_t r = 0; r < nrows; ++r) acc *= std::complex<double>(rows[r][j]);
    out[j] = ReducePartial{};
    out[j].v[0] = acc.real();
    out[j].v[1] = acc.imag();
  }
}

// ---- sum |x|^p for a general p, in double ----
template <class T>
void row_sum_pow_abs(const void* xv, int64_t n, int64_t, const ReduceParams& params, ReducePartial* out) {
  const T* x = static_cast<const T*>(xv);
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += std::pow(std::abs(static_cast<double>(x[i])), params.p);
  *out = ReducePartial{};
  out->v[0] = acc;
}

template <class T>
void column_sum_pow_abs(const void* const* rows_v, int64_t nrows, int64_t w, int64_t, const ReduceParams& params,
                        ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  for (int64_t j = 0; j < w; ++j) out[j] = ReducePartial{};
  for (int64_t r = 0; r < nrows; ++r) {
    for (int64_t j = 0; j < w; ++j) out[j].v[0] += std::pow(std::abs(static_cast<double>(rows[r][j])), params.p);
  }
}

template <class R>
ReduceKernel complex_kernel(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum:
      return {&complex_row_sum<R>, &complex_column_sum<R>, &combine_sum};
    case ReduceKind::Prod:
      return {&complex_row_prod<R>, &complex_column_prod<R>, &combine_prod_complex};
    default:
      fail(ErrorKind::NotImplemented, reduce_kind_name(kind), "not implemented for complex inputs");
  }
}

bool is_minmax_kind(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Max:
    case ReduceKind::Min:
    case ReduceKind::MaxAbs:
    case ReduceKind::MinAbs:
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
      return true;
    default:
      return false;
  }
}

}  // namespace

ReduceKernel reduce_kernel(ReduceKind kind, DType compute) {
  switch (compute) {
    case DType::Float32:
      if (kind == ReduceKind::SumPowAbs) return {&row_sum_pow_abs<float>, &column_sum_pow_abs<float>, &combine_sum};
      return is_minmax_kind(kind) ? reduce_minmax_kernels_f32(kind) : reduce_sum_kernels_f32(kind);
    case DType::Float64:
      if (kind == ReduceKind::SumPowAbs) return {&row_sum_pow_abs<double>, &column_sum_pow_abs<double>, &combine_sum};
      return is_minmax_kind(kind) ? reduce_minmax_kernels_f64(kind) : reduce_sum_kernels_f64(kind);
    case DType::Complex64:
      return complex_kernel<float>(kind);
    case DType::Complex128:
      return complex_kernel<double>(kind);
    default:
      if (is_integral(compute, /*include_bool=*/true)) return reduce_int_kernel(kind, compute);
      fail(ErrorKind::NotImplemented, "reduce", "no reduction kernels run in {}", dtype_name(compute));
  }
}

DType reduce_compute_dtype(ReduceKind kind, DType input) {
  if (kind == ReduceKind::MeanM2 && is_floating(input)) return DType::Float64;
  return is_reduced_float(input) ? DType::Float32 : input;
}

ReducePartial reduce_identity(ReduceKind kind) {
  ReducePartial p;
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::SumAbs:
    case ReduceKind::SumSquares:
    case ReduceKind::CountNonZero:
    case ReduceKind::SumPowAbs:
    case ReduceKind::MeanM2:
      return p;
    case ReduceKind::Prod:
      p.v[0] = 1.0;
      p.i = 1;
      return p;
    default:
      // The front ends refuse these before allocating; PyTorch's wording all the same.
      fail(ErrorKind::Runtime, reduce_kind_name(kind),
           "cannot perform reduction function {} on a tensor with no elements because the operation does not have "
           "an identity",
           reduce_kind_name(kind));
  }
}

}  // namespace kiln::cpu
