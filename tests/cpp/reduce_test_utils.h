// Shared helpers of the reduction, scan and sort tests: building tensors from plain
// vectors, reading them back as doubles, a reference that groups the reduced values of
// each output, the size sweep, and running a body once per Highway target.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/reduce/reduce_kernels.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "simd_targets.h"
#include "test_util.h"

namespace kiln::reduce_test {

using kiln::testing::expect_error;

// Sizes around every SIMD width (4..16 lanes of f32/f64 on the compiled targets), one
// that needs several row blocks, and one big enough to use several threads.
inline const std::vector<int64_t> kSweepSizes = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                                                 1000, 40000, 100003};

inline Tensor from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, DType::Float64);
  // An empty tensor has no data pointer, and memcpy from or to null is undefined even for 0 bytes.
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(double));
  return t.to(dtype);
}

inline Tensor from_complex(const std::vector<std::complex<double>>& values, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, DType::Complex128);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(std::complex<double>));
  return t.to(dtype);
}

// Logical (row-major) values of any view.
inline std::vector<double> to_doubles(const Tensor& t) {
  Tensor c = t.to(DType::Float64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

inline std::vector<std::complex<double>> to_complex(const Tensor& t) {
  Tensor c = t.to(DType::Complex128).contiguous();
  const auto* p = c.data<std::complex<double>>();
  return std::vector<std::complex<double>>(p, p + c.numel());
}

inline std::vector<int64_t> to_int64s(const Tensor& t) {
  Tensor c = t.to(DType::Int64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// Every value of t exactly (long double holds all int64 and uint64 values).
inline std::vector<long double> exact_values(const Tensor& t) {
  std::vector<long double> v;
  v.reserve(static_cast<size_t>(t.numel()));
  if (is_integral(t.dtype(), true)) {
    for (int64_t i : to_int64s(t)) {
      v.push_back(is_unsigned(t.dtype()) ? static_cast<long double>(static_cast<uint64_t>(i))
                                         : static_cast<long double>(i));
    }
  } else {
    for (double d : to_doubles(t)) v.push_back(d);
  }
  return v;
}

// Uniform values in [lo, hi], rounded to integers when `integral`.
inline std::vector<double> random_values(int64_t n, uint32_t seed, double lo = -1.0, double hi = 1.0,
                                         bool integral = false) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = integral ? std::round(dist(gen)) : dist(gen);
  return v;
}

inline Tensor random_tensor(const Shape& shape, DType dtype, uint32_t seed) {
  const bool integral = is_integral(dtype, true);
  const double lo = dtype == DType::Bool ? 0.0 : is_unsigned(dtype) ? 0.0 : integral ? -100.0 : -1.0;
  const double hi = dtype == DType::Bool ? 1.0 : integral ? 100.0 : 1.0;
  if (is_complex(dtype)) {
    const auto re = random_values(shape_numel(shape), seed), im = random_values(shape_numel(shape), seed + 1);
    std::vector<std::complex<double>> z(re.size());
    for (size_t i = 0; i < z.size(); ++i) z[i] = {re[i], im[i]};
    return from_complex(z, shape, dtype);
  }
  return from_doubles(random_values(shape_numel(shape), seed, lo, hi, integral), shape, dtype);
}

// For each output of a reduction of a tensor of `shape` over the flagged dims, the
// positions (row-major over the whole tensor) of its inputs, in row-major order of
// the reduced dims.
inline std::vector<std::vector<int64_t>> reduction_groups(const Shape& shape, const std::vector<bool>& reduced) {
  int64_t outputs = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) outputs *= shape[d];
  }
  std::vector<std::vector<int64_t>> groups(static_cast<size_t>(outputs));
  const int64_t n = shape_numel(shape);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rest = flat, out = 0, out_scale = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t i = rest % shape[d];
      rest /= shape[d];
      if (!reduced[d]) {
        out += i * out_scale;
        out_scale *= shape[d];
      }
    }
    groups[out].push_back(flat);
  }
  return groups;
}

inline std::vector<bool> flags(int64_t ndim, const std::vector<int64_t>& dims) {
  std::vector<bool> r(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims) r[(d % ndim + ndim) % ndim] = true;
  return r;
}

// Exact-enough reference sum: Neumaier's compensated sum in long double.
inline double accurate_sum(const std::vector<double>& x) {
  long double s = 0, c = 0;
  for (double v : x) {
    const long double y = v, t = s + y;
    c += std::fabs(s) >= std::fabs(y) ? (s - t) + y : (y - t) + s;
    s = t;
  }
  return static_cast<double>(s + c);
}

inline std::complex<double> accurate_sum(const std::vector<std::complex<double>>& z) {
  std::vector<double> re, im;
  for (const auto& v : z) {
    re.push_back(v.real());
    im.push_back(v.imag());
  }
  return {accurate_sum(re), accurate_sum(im)};
}

// Unit roundoff of storing a result in `dtype` (0 for exact dtypes).
inline double store_roundoff(DType dtype) {
  switch (dtype) {
    case DType::Float16: return std::ldexp(1.0, -11);
    case DType::BFloat16: return std::ldexp(1.0, -8);
    case DType::Float32:
    case DType::Complex64: return std::ldexp(1.0, -24);
    case DType::Float64:
    case DType::Complex128: return std::ldexp(1.0, -53);
    case DType::Float8_e4m3fn: return std::ldexp(1.0, -4);
    case DType::Float8_e5m2: return std::ldexp(1.0, -3);
    default: return 0.0;
  }
}

// Half the smallest subnormal of `dtype`: the absolute error of storing a result
// that underflows (a long product in float16, say).
inline double store_underflow(DType dtype) {
  switch (dtype) {
    case DType::Float16: return std::ldexp(1.0, -25);
    case DType::BFloat16:
    case DType::Float32:
    case DType::Complex64: return std::ldexp(1.0, -134);
    case DType::Float8_e4m3fn: return std::ldexp(1.0, -10);
    case DType::Float8_e5m2: return std::ldexp(1.0, -17);
    default: return 0.0;
  }
}

// Machine epsilon of the dtype a float reduction accumulates in: f32 for f32 and the
// narrow floats, f64 for f64.
inline double accumulate_eps(DType dtype) {
  return dtype == DType::Float64 || dtype == DType::Complex128 ? std::ldexp(1.0, -52) : std::ldexp(1.0, -23);
}

// Bound on a pairwise (cascade) float sum of n terms: each term passes through at most
// 8 sequential adds in its SIMD accumulator, 2 combining the accumulators and
// ceil(log2 n) pairwise levels, each adding at most eps/2 relative error to a partial
// bounded by sum|x|; so |err| <= (10 + log2 n) * eps * sum|x| with margin. Storing the
// result adds the output dtype's unit roundoff relative to |result| (or its underflow).
inline double sum_tolerance(DType dtype, int64_t n, double abs_sum, double result) {
  const double levels = 10.0 + std::log2(static_cast<double>(std::max<int64_t>(n, 1)));
  return levels * accumulate_eps(dtype) * abs_sum + 2 * store_roundoff(dtype) * std::abs(result) +
         store_underflow(dtype) + 1e-300;
}

// Runs body once per Highway target the reduction kernels were compiled for and this
// CPU supports, with dispatch pinned to it.
template <class Body>
void for_each_target(Body body) {
  simd_targets::for_each(cpu::reduce_simd_targets(), body);
}

}  // namespace kiln::reduce_test
