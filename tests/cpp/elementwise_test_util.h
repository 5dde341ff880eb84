// Shared helpers of the elementwise tests (test_elementwise_*.cpp): building inputs
// in any dtype and layout, reading results back, and comparing against a scalar
// reference with a tolerance derived from the kernel's ulp budget.
#pragma once

#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/tensor.h"

namespace kiln::ew_test {

// Sizes around every vector width (f32 lanes: 1 scalar, 4 SSE/NEON, 8 AVX2, 16 AVX-512;
// f64 half that): lanes - 1, lanes, lanes + 1, 2 * lanes + 1, then arrays that cross
// the loop engine's 512-element chunks (1000) and its 16384-element thread grain
// (100003, split across the pool when it has more than one thread).
inline const std::vector<int64_t> kSizes = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 1000, 100003};
// The same without the long array, for sweeps repeated on every SIMD target.
inline const std::vector<int64_t> kTargetSizes = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 1000};

inline const std::vector<DType> kFloatDtypes = {DType::Float32,  DType::Float64,       DType::Float16,
                                                DType::BFloat16, DType::Float8_e4m3fn, DType::Float8_e5m2};
inline const std::vector<DType> kIntDtypes = {DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64,
                                              DType::Int8,  DType::Int16,  DType::Int32,  DType::Int64};

// How an input's elements are laid out in memory (the logical values are the same).
enum class Layout {
  Contiguous,
  Strided,  // every third element of a larger buffer
  Transposed,  // a transposed 2-D view (row-major [k, m] read as [m, k]) when n allows, else strided
};
inline const std::vector<Layout> kLayouts = {Layout::Contiguous, Layout::Strided, Layout::Transposed};
std::string layout_name(Layout layout);

// A 1-D tensor (2-D for Layout::Transposed with a composite n) of `dtype` holding
// `values` (stored with kiln's cast rules) in the given layout.
Tensor make_tensor(const std::vector<double>& values, DType dtype, Layout layout = Layout::Contiguous);
Tensor make_int_tensor(const std::vector<int64_t>& values, DType dtype);
Tensor make_complex_tensor(const std::vector<std::complex<double>>& values, DType dtype);

// The elements in logical (row-major) order.
std::vector<double> to_doubles(const Tensor& t);   // exact for all but 64-bit ints past 2^53
std::vector<int64_t> to_int64s(const Tensor& t);   // integer/bool dtypes (uint64 as its bits)
std::vector<std::complex<double>> to_complexes(const Tensor& t);

// n values uniform in [lo, hi] (fixed seed per call site), preceded by `specials`.
std::vector<double> random_values(int64_t n, double lo, double hi, uint64_t seed,
                                  const std::vector<double>& specials = {});

// v stored in `dtype` (double -> float -> narrow type, as kiln's casts do).
double round_to(DType dtype, double v);

// Tolerance terms. compute_eps: 2^-23 when the dtype computes in float32 (f32, f16,
// bf16, fp8), 2^-52 for f64; "k ulp" of a kernel below means a relative error of at
// most k * compute_eps. unit_roundoff: half an ulp of the storage dtype (f16 2^-11,
// bf16 2^-8, e4m3fn 2^-4, e5m2 2^-3), the final rounding of a narrow result; it is 0
// for f32/f64, whose single rounding the ulp budget already counts. min_normal: the
// smallest normal of the storage dtype; below it relative precision is gone and a
// kernel may legitimately flush to zero.
double compute_eps(DType t);
double unit_roundoff(DType t);
double min_normal(DType t);

// Passes when got is the reference stored in `out` exactly (this covers inf, NaN,
// saturation) or |got - ref| <= (ulps * compute_eps + unit_roundoff) * |ref| + min_normal.
// ref is long double so that a float64 reference is not rounded before the comparison
// (rounding it to double first could put a correctly rounded result 1 ulp away).
::testing::AssertionResult close_to(double got, long double ref, DType out, double ulps);

// Runs body() once with Highway dispatch pinned to each SIMD target this CPU supports.
void for_each_simd_target(const std::function<void()>& body);

}  // namespace kiln::ew_test
