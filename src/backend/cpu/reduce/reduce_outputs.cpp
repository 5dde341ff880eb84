// Finishing the reductions (see reduce_outputs.h).
//
// Complex input is handled through real views: a complex tensor is a real one with a
// trailing (re, im) dim of size 2. var(z) = var(re) + var(im), and the 2-norm of z is
// the 2-norm of its reals; other norms take |z| first.
#include "backend/cpu/reduce/reduce_outputs.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/cast/cast.h"
#include "backend/cpu/reduce/reduce_loop.h"

namespace kiln::cpu {
namespace {

// Outputs converted and written at once.
constexpr int64_t kBatch = 256;

// Writes n values of type T (double, int64_t or std::complex<double>) to the contiguous
// tensor `out` at element `first`, converting to out's dtype.
template <class T>
void store_values(const Tensor& out, int64_t first, int64_t n, const T* values) {
  constexpr DType src = std::is_same_v<T, double>    ? DType::Float64
                        : std::is_same_v<T, int64_t> ? DType::Int64
                                                     : DType::Complex128;
  const int64_t size = static_cast<int64_t>(out.element_size());
  cast_strided(src, values, sizeof(T), out.dtype(), static_cast<char*>(out.data_ptr()) + first * size, size, n);
}

// Writes finish(p[k]) (a double) for n partials.
template <class Finish>
void store_finished(const Tensor& out, const ReducePartial* p, int64_t first, int64_t n, const Finish& finish) {
  double values[kBatch];
  for (int64_t k0 = 0; k0 < n; k0 += kBatch) {
    const int64_t m = std::min(kBatch, n - k0);
    for (int64_t k = 0; k < m; ++k) values[k] = finish(p[k0 + k]);
    store_values(out, first + k0, m, values);
  }
}

// How a ReducePartial holds its result for input of dtype t.
enum class PartialValue { Real, Integer, Complex };
PartialValue partial_value_of(DType t) {
  if (is_complex(t)) return PartialValue::Complex;
  return is_floating(t) ? PartialValue::Real : PartialValue::Integer;
}

// Writes the plain value of each partial (v[0], i, or v[0] + i v[1]) divided by
// `divisor` (1 for sums; the count for means) into `out`.
void store_partial_values(const Tensor& out, PartialValue kind, const ReducePartial* p, int64_t first, int64_t n,
                          double divisor) {
  for (int64_t k0 = 0; k0 < n; k0 += kBatch) {
    const int64_t m = std::min(kBatch, n - k0);
    if (kind == PartialValue::Integer) {
      int64_t buf[kBatch];
      for (int64_t k = 0; k < m; ++k) buf[k] = p[k0 + k].i;
      store_values(out, first + k0, m, buf);
    } else if (kind == PartialValue::Real) {
      double buf[kBatch];
      for (int64_t k = 0; k < m; ++k) buf[k] = p[k0 + k].v[0] / divisor;
      store_values(out, first + k0, m, buf);
    } else {
      std::complex<double> buf[kBatch];
      for (int64_t k = 0; k < m; ++k) buf[k] = std::complex<double>(p[k0 + k].v[0] / divisor, p[k0 + k].v[1] / divisor);
      store_values(out, first + k0, m, buf);
    }
  }
}

// The real tensor viewing a complex one's (re, im) pairs as a trailing dim of size 2.
Tensor view_as_real(const Tensor& z) {
  Shape sizes = z.sizes(), strides = z.strides();
  // A dim never stepped (one element, or any dim of an empty tensor) may carry any
  // stride: it becomes 0 instead of being doubled (2^62 * 2 overflows).
  const bool empty = z.numel() == 0;
  for (size_t d = 0; d < strides.size(); ++d) strides[d] = empty || sizes[d] <= 1 ? 0 : strides[d] * 2;
  sizes.push_back(2);
  strides.push_back(1);
  return Tensor::from_storage(z.storage(), sizes, strides, z.storage_offset() * 2, to_real(z.dtype()));
}

// |z| of a complex tensor, as a contiguous real tensor.
Tensor complex_abs(ThreadPool& pool, const Tensor& z) {
  const Tensor zc = z.contiguous();
  Tensor out = Tensor::empty(z.sizes(), to_real(z.dtype()));
  const int64_t n = z.numel();
  pool.parallel_for(n, 1 << 14, [&](int64_t begin, int64_t end) {
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

}  // namespace

void reduce_cpu(ThreadPool& pool, const backend::ReduceProblem& r) {
  const PartialValue value = partial_value_of(r.input.dtype());
  reduce_loop(pool, r.input, r.reduced, {r.kind, {}}, [&](const ReducePartial* p, int64_t first, int64_t n) {
    if (r.values.defined()) store_partial_values(r.values, value, p, first, n, r.divisor);
    if (!r.indices.defined()) return;
    int64_t* out = r.indices.data<int64_t>() + first;
    for (int64_t k = 0; k < n; ++k) out[k] = p[k].index;
  });
}

void variance_cpu(ThreadPool& pool, const backend::VarianceProblem& v) {
  auto finish = [&](double m2) {
    const double var = m2 / v.divisor;
    return v.take_sqrt ? std::sqrt(var) : var;
  };
  const ReduceSpec spec{ReduceKind::MeanM2, {}};
  if (!is_complex(v.input.dtype())) {
    reduce_loop(pool, v.input, v.reduced, spec, [&](const ReducePartial* p, int64_t first, int64_t n) {
      store_finished(v.out, p, first, n, [&](const ReducePartial& part) { return finish(part.m2); });
    });
    return;
  }
  // Outputs of the real view come in (re, im) pairs; the sink may split a pair, so the
  // sums of squared deviations are gathered first.
  std::vector<bool> reduced = v.reduced;
  reduced.push_back(false);
  std::vector<double> m2(static_cast<size_t>(v.out.numel() * 2));
  reduce_loop(pool, view_as_real(v.input), reduced, spec, [&](const ReducePartial* p, int64_t first, int64_t n) {
    for (int64_t k = 0; k < n; ++k) m2[first + k] = p[k].m2;
  });
  std::vector<double> values(static_cast<size_t>(v.out.numel()));
  for (size_t o = 0; o < values.size(); ++o) values[o] = finish(m2[2 * o] + m2[2 * o + 1]);
  store_values(v.out, 0, v.out.numel(), values.data());
}

void vector_norm_cpu(ThreadPool& pool, const backend::VectorNormProblem& v) {
  const ReduceKind kind = norm_kind(v.p);
  Tensor src = v.input;
  std::vector<bool> reduced = v.reduced;
  if (is_complex(v.input.dtype())) {
    if (kind == ReduceKind::SumSquares) {
      src = view_as_real(v.input);
      reduced.push_back(true);
    } else {
      src = complex_abs(pool, v.input);
    }
  }
  reduce_loop(pool, src, reduced, {kind, {v.p}}, [&](const ReducePartial* p, int64_t first, int64_t n) {
    store_finished(v.out, p, first, n, [&](const ReducePartial& part) { return norm_finish(kind, v.p, part.v[0]); });
  });
}

}  // namespace kiln::cpu
