// Shared by test_linear.cpp and test_linear_fp8.cpp: random operands, a float64
// reference for y = x W^T + b, the tolerance it is compared with, and a loop over the
// Highway targets of the GEMV kernels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/linear/linear_kernels.h"
#include "kiln/cpu_features.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/scalar_types.h"
#include "simd_targets.h"

namespace linear_test {

using namespace kiln;

template <typename F>
void expect_error(F&& f, ErrorKind kind, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Normal values rounded to `dt` (exact in every dtype tested afterwards).
inline Tensor random_tensor(const Shape& shape, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn(shape, DType::Float64, &g).to(dt);
}

// Uniformly random float8_e4m3fn codes, without the NaN codes 0x7F and 0xFF.
inline Tensor random_fp8(const Shape& shape, uint64_t seed) {
  Tensor t = empty(shape, DType::Float8_e4m3fn);
  std::mt19937_64 rng(seed);
  uint8_t* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint8_t b = static_cast<uint8_t>(rng());
    if ((b & 0x7F) == 0x7F) b ^= 0x01;
    p[i] = b;
  }
  return t;
}

// Row-major values of any tensor as double (exact for every dtype used here).
inline std::vector<double> values(const Tensor& t) {
  Tensor d = t.to(DType::Float64).contiguous();
  const double* p = d.data<double>();
  return std::vector<double>(p, p + d.numel());
}

// x's values as the kernel multiplies them: many-row linear with bfloat16 or FP8 weights
// on the bf16 dot path (kiln/cpu_features.h) rounds x to bf16 first (exact for bf16 x);
// so does the one-row FP8 kernel on its bf16 dot path (cpu::fp8_kernels_round_x_to_bf16);
// the other one-row kernels and the float32 paths use x as it is.
inline std::vector<double> activations_as_used(const Tensor& x, int64_t M, DType weight_dtype) {
  const bool many_rows = M > 1 && bf16_dot_enabled() &&
                         (weight_dtype == DType::BFloat16 || weight_dtype == DType::Float8_e4m3fn);
  const bool fp8_one_row = M == 1 && weight_dtype == DType::Float8_e4m3fn && cpu::fp8_kernels_round_x_to_bf16();
  return values(many_rows || fp8_one_row ? x.to(DType::BFloat16) : x);
}

// y[m, n] = sum_k x[m, k] w[n, k] + b[n] in double, and the magnitude sum_k |x w| + |b|
// that bounds the rounding error of any summation order.
struct Reference {
  std::vector<double> value;
  std::vector<double> magnitude;
};

// x: [M, K], w: [N, K] row-major values; bias: empty, one value, or N values.
inline Reference reference_linear(const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& bias, int64_t M, int64_t N, int64_t K) {
  Reference ref;
  ref.value.assign(static_cast<size_t>(M * N), 0.0);
  ref.magnitude.assign(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double s = 0, a = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = x[static_cast<size_t>(m * K + k)] * w[static_cast<size_t>(n * K + k)];
        s += p;
        a += std::fabs(p);
      }
      if (!bias.empty()) {
        const double b = bias[bias.size() == 1 ? 0 : static_cast<size_t>(n)];
        s += b;
        a += std::fabs(b);
      }
      ref.value[static_cast<size_t>(m * N + n)] = s;
      ref.magnitude[static_cast<size_t>(m * N + n)] = a;
    }
  }
  return ref;
}

// Tolerance. The kernels accumulate in f32 (f64 for float64) with FMAs, several partial
// sums and a final horizontal sum; block-scaled FP8 adds one rounding per block partial
// sum and the many-row path one per widened weight. Any such evaluation of a sum of K
// products obeys |computed - exact| <= gamma_{K+c} * sum |x w| with gamma_n = n u / (1 - n u)
// (Higham, Accuracy and Stability, 3.1), where the constant c <= 8 covers the extra
// roundings (scale multiply, bias add, horizontal sum depth). Bounding gamma by
// n * eps (eps = 2u) leaves a factor 2 of margin. Results stored in bf16/f16 are rounded
// once more: at most u_out = 2^-8 (bf16) or 2^-11 (f16) of the value.
inline double accumulation_tolerance(DType out, int64_t K, double magnitude) {
  const double eps = out == DType::Float64 ? 0x1p-52 : 0x1p-23;
  return static_cast<double>(K + 8) * eps * magnitude;
}

inline double output_unit_roundoff(DType out) {
  switch (out) {
    case DType::BFloat16: return 0x1p-8;
    case DType::Float16: return 0x1p-11;
    default: return 0.0;
  }
}

// Checks got (shape [..., N], M rows in all) against the reference.
inline void expect_close(const Tensor& got, const Reference& ref, int64_t K, const std::string& what) {
  const std::vector<double> g = values(got);
  ASSERT_EQ(g.size(), ref.value.size()) << what;
  const double u_out = output_unit_roundoff(got.dtype());
  for (size_t i = 0; i < g.size(); ++i) {
    const double acc = accumulation_tolerance(got.dtype(), K, ref.magnitude[i]);
    // The smallest f16 subnormal (2^-24) as an absolute floor for results near zero.
    const double tol = acc + u_out * (std::fabs(ref.value[i]) + acc) + (u_out > 0 ? 0x1p-24 : 0.0);
    if (!(std::fabs(g[i] - ref.value[i]) <= tol)) {
      ADD_FAILURE() << what << ": element " << i << " got " << g[i] << ", want " << ref.value[i] << " (tol " << tol
                    << ")";
      return;
    }
  }
}

// On their bf16 dot path (gemv-inl.h) the one-row FP8 kernels round x to bfloat16 first:
// x's values as the current dispatch target multiplies them, for a float64 reference.
inline std::vector<double> fp8_gemv_x_values(const Tensor& x) {
  return cpu::fp8_kernels_round_x_to_bf16() ? values(x.to(DType::BFloat16)) : values(x);
}

// How far that rounding can move a dot product, relative to its magnitude sum |x w|:
// round to nearest even with 8 significant bits errs by at most u = 2^-8 of each x.
inline double fp8_gemv_x_rounding() { return cpu::fp8_kernels_round_x_to_bf16() ? 0x1p-8 : 0.0; }

// Runs `body` once per Highway target the GEMV kernels were compiled for and this CPU
// supports, with dispatch pinned to it.
template <typename Body>
void for_each_target(Body body) {
  simd_targets::for_each(cpu::gemv_simd_targets(), body);
}

}  // namespace linear_test
