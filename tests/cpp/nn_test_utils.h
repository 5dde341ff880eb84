// Helpers of the softmax, norm, rope and fused-activation tests: tensors from and to
// plain doubles, unit roundoffs, running a body once per Highway target, and checking
// kiln::Error kinds and messages.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/tensor.h"
#include "simd_targets.h"

namespace kiln::nn_test {

inline Tensor from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, DType::Float64);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(double));
  return t.to(dtype);
}

// Logical (row-major) values of any view.
inline std::vector<double> to_doubles(const Tensor& t) {
  const Tensor c = t.to(DType::Float64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

// Rounds v to dtype (the oracle's cast, the same one the test inputs went through).
inline double round_to(double v, DType dtype) { return to_doubles(from_doubles({v}, {1}, dtype))[0]; }

// Uniform values in [lo, hi].
inline std::vector<double> uniform(int64_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(gen);
  return v;
}

// A random tensor of `dtype`, and its exact values as doubles (after rounding to dtype).
struct Sample {
  Tensor tensor;
  std::vector<double> values;
};
inline Sample random_sample(const Shape& shape, DType dtype, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor t = from_doubles(uniform(shape_numel(shape), seed, lo, hi), shape, dtype);
  return {t, to_doubles(t)};
}

// Unit roundoff of a dtype's storage: half its machine epsilon.
inline double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::Float16: return std::ldexp(1.0, -11);
    case DType::BFloat16: return std::ldexp(1.0, -8);
    case DType::Float64: return std::ldexp(1.0, -53);
    default: return std::ldexp(1.0, -24);
  }
}

// Half the smallest subnormal: the absolute error of storing a tiny result (float16's
// subnormals start at 6e-8, so it matters there).
inline double underflow_error(DType dtype) {
  return dtype == DType::Float16 ? std::ldexp(1.0, -25) : dtype == DType::Float64 ? 0.0 : std::ldexp(1.0, -150);
}

// The largest finite value of a float dtype: a result past it rounds to infinity.
inline double max_finite(DType dtype) {
  switch (dtype) {
    case DType::Float16: return 65504.0;
    case DType::BFloat16: return 3.3895313892515355e38;
    case DType::Float64: return 1.7976931348623157e308;
    default: return 3.4028234663852886e38;
  }
}

// Unit roundoff of the dtype a kernel computes in for `dtype` storage.
inline double compute_roundoff(DType dtype) { return unit_roundoff(dtype == DType::Float64 ? dtype : DType::Float32); }

// Runs body once per Highway target in `compiled` this CPU supports, dispatch pinned to it.
template <class Body>
void for_each_target(int64_t compiled, Body body) {
  simd_targets::for_each(compiled, body);
}

// Expects fn to throw kiln::Error of `kind` whose message contains every piece of `texts`.
template <class Fn>
void expect_error(Fn fn, ErrorKind kind, const std::vector<std::string>& texts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << texts.front() << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    for (const std::string& text : texts) EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// |got - want| <= tol, with NaN matching NaN and infinities matching exactly.
inline ::testing::AssertionResult near(double got, double want, double tol) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
  } else if (std::isinf(want)) {
    if (got == want) return ::testing::AssertionSuccess();
  } else if (std::fabs(got - want) <= tol) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << got << ", want " << want << " (tolerance " << tol << ")";
}

}  // namespace kiln::nn_test
