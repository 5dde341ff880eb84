// Helpers of the linalg tests: random matrices of a chosen conditioning, values as
// complex<double>, and plain complex<double> references (matrix product, triangular
// solve, Gaussian-elimination determinant) the kernels are checked against.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <vector>

#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/tensor.h"

namespace kiln::linalg_test {

using cd = std::complex<double>;
using Values = std::vector<cd>;

inline const DType kLinalgDTypes[] = {DType::Float32, DType::Float64, DType::Complex64, DType::Complex128};

// Unit roundoff of the dtype's real part.
inline double eps_of(DType dt) {
  return dt == DType::Float64 || dt == DType::Complex128 ? std::numeric_limits<double>::epsilon()
                                                         : std::numeric_limits<float>::epsilon();
}

// Standard normal entries (complex: independent real and imaginary parts).
inline Tensor random_tensor(const Shape& shape, DType dt, uint64_t seed) {
  Generator g(seed);
  if (is_complex(dt)) {
    Shape pairs = shape;
    pairs.push_back(2);
    Tensor re_im = randn(pairs, DType::Float64, &g);
    return Tensor::from_storage(re_im.storage(), shape, contiguous_strides(shape), 0, DType::Complex128).to(dt);
  }
  return randn(shape, DType::Float64, &g).to(dt);
}

// Row-major values as complex<double> (exact for every linalg dtype).
inline Values values(const Tensor& t) {
  Tensor c = t.to(DType::Complex128).contiguous();
  const cd* p = c.data<cd>();
  return Values(p, p + c.numel());
}

inline Tensor from_values(const Values& v, const Shape& shape, DType dt) {
  if (!is_complex(dt)) {
    Tensor r = empty(shape, DType::Float64);
    for (size_t i = 0; i < v.size(); ++i) r.data<double>()[i] = v[i].real();
    return r.to(dt);
  }
  Tensor c = empty(shape, DType::Complex128);
  std::copy(v.begin(), v.end(), c.data<cd>());
  return c.to(dt);
}

inline double max_abs(const Values& v) {
  double m = 0;
  for (const cd& x : v) m = std::max(m, std::abs(x));
  return m;
}

// C (m x n) = A (m x k) B (k x n), row-major, one matrix at offset.
inline Values matmul_ref(const cd* a, const cd* b, int64_t m, int64_t k, int64_t n) {
  Values c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      cd s = 0;
      for (int64_t t = 0; t < k; ++t) s += a[i * k + t] * b[t * n + j];
      c[i * n + j] = s;
    }
  return c;
}

inline Values conj_transpose(const cd* a, int64_t m, int64_t n) {
  Values t(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) t[j * m + i] = std::conj(a[i * n + j]);
  return t;
}

// Largest |x - y| over two equally long runs.
inline double max_diff(const cd* x, const cd* y, int64_t count) {
  double d = 0;
  for (int64_t i = 0; i < count; ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

inline double identity_error(const Values& m, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) d = std::max(d, std::abs(m[i * n + j] - cd(i == j ? 1.0 : 0.0)));
  return d;
}

// A well-conditioned batch: standard normal plus 2 sqrt(n) on the diagonal, whose
// condition number stays below ~10 (the normal part has spectral norm ~2 sqrt(n)).
inline Tensor well_conditioned(const Shape& shape, DType dt, uint64_t seed) {
  const int64_t n = shape.back();
  Values v = values(random_tensor(shape, DType::Complex128, seed));
  if (!is_complex(dt))
    for (cd& x : v) x = x.real();
  const int64_t per = n * n;
  for (size_t b = 0; b < v.size() / std::max<int64_t>(per, 1); ++b)
    for (int64_t i = 0; i < n; ++i) v[b * per + i * n + i] += 2.0 * std::sqrt(static_cast<double>(n)) + 1.0;
  return from_values(v, shape, dt);
}

// Determinant by Gaussian elimination with partial pivoting in complex<double>.
inline cd det_ref(Values a, int64_t n) {
  cd det = 1;
  for (int64_t j = 0; j < n; ++j) {
    int64_t p = j;
    for (int64_t i = j + 1; i < n; ++i)
      if (std::abs(a[i * n + j]) > std::abs(a[p * n + j])) p = i;
    if (a[p * n + j] == cd(0)) return 0;
    if (p != j) {
      for (int64_t c = 0; c < n; ++c) std::swap(a[j * n + c], a[p * n + c]);
      det = -det;
    }
    det *= a[j * n + j];
    for (int64_t i = j + 1; i < n; ++i) {
      const cd f = a[i * n + j] / a[j * n + j];
      for (int64_t c = j; c < n; ++c) a[i * n + c] -= f * a[j * n + c];
    }
  }
  return det;
}

// X solving op(T) X = B (left) or X op(T) = B (right) by substitution in complex<double>;
// T read through its triangle only (and not its diagonal when unit).
inline Values triangular_ref(const cd* t, const cd* b, int64_t n, int64_t rows, int64_t cols, bool upper, bool left,
                            bool unit) {
  Values x(b, b + rows * cols);
  auto entry = [&](int64_t i, int64_t j) {  // T (left) or Tᵀ (right)
    return left ? t[i * n + j] : t[j * n + i];
  };
  const bool up = left ? upper : !upper;
  const int64_t systems = left ? cols : rows;
  for (int64_t s = 0; s < systems; ++s) {
    auto at = [&](int64_t i) -> cd& { return left ? x[i * cols + s] : x[s * cols + i]; };
    for (int64_t step = 0; step < n; ++step) {
      const int64_t i = up ? n - 1 - step : step;
      cd acc = at(i);
      for (int64_t j = up ? i + 1 : 0; j < (up ? n : i); ++j) acc -= entry(i, j) * at(j);
      at(i) = unit ? acc : acc / entry(i, i);
    }
  }
  return x;
}

// A triangular test matrix: row-wise diagonally dominant (cond < ~10) or, for unit
// solves, off-diagonal entries of size 1/n (so the solve's growth stays bounded) and
// NaN on the diagonal and in the other triangle, which must never be read.
inline Tensor triangle(int64_t batch, int64_t n, DType dt, bool upper, bool unit, uint64_t seed) {
  Values v = values(random_tensor({batch, n, n}, DType::Complex128, seed));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        cd& e = v[(b * n + i) * n + j];
        if (!is_complex(dt)) e = e.real();
        const bool inside = upper ? j >= i : j <= i;
        if (!inside || (unit && i == j)) e = cd(nan, 0);
        else if (i == j) e += static_cast<double>(n) + 1.0;
        else if (unit) e /= static_cast<double>(n);
      }
  return from_values(v, {batch, n, n}, dt);
}

}  // namespace kiln::linalg_test
