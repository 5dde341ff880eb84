#include "elementwise_test_util.h"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <random>

#include "backend/cpu/elementwise/elementwise_kernels.h"
#include "kiln/ops/creation.h"
#include "kiln/scalar_types.h"
#include "simd_targets.h"

namespace kiln::ew_test {

std::string layout_name(Layout layout) {
  switch (layout) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Strided: return "strided";
    case Layout::Transposed: return "transposed";
  }
  return "?";
}

namespace {

Tensor f64_tensor(const std::vector<double>& values) {
  Tensor t = empty({static_cast<int64_t>(values.size())}, DType::Float64);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(double));
  return t;
}

// The smallest factor k >= 2 of n with n / k >= 2, or 0.
int64_t small_factor(int64_t n) {
  for (int64_t k = 2; k * k <= n; ++k) {
    if (n % k == 0) return k;
  }
  return 0;
}

// `src` (1-D, contiguous, any dtype) copied into a view of `dtype` with the layout.
Tensor lay_out(const Tensor& src, DType dtype, Layout layout) {
  const int64_t n = src.numel();
  const int64_t k = small_factor(n);
  if (layout == Layout::Contiguous) {
    Tensor t = empty({n}, dtype);
    t.copy_(src);
    return t;
  }
  if (layout == Layout::Transposed && k != 0) {
    // base is [k, m] row-major; its transpose [m, k] is read column by column.
    const int64_t m = n / k;
    Tensor base = zeros({k, m}, dtype);
    Tensor view = base.t();
    view.copy_(src.view({m, k}));
    return view;
  }
  Tensor buffer = zeros({n, 3}, dtype);
  Tensor view = buffer.select(1, 1);
  view.copy_(src);
  return view;
}

}  // namespace

Tensor make_tensor(const std::vector<double>& values, DType dtype, Layout layout) {
  return lay_out(f64_tensor(values), dtype, layout);
}

Tensor make_int_tensor(const std::vector<int64_t>& values, DType dtype) {
  Tensor t = empty({static_cast<int64_t>(values.size())}, DType::Int64);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(int64_t));
  return t.to(dtype);
}

Tensor make_complex_tensor(const std::vector<std::complex<double>>& values, DType dtype) {
  Tensor t = empty({static_cast<int64_t>(values.size())}, DType::Complex128);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(std::complex<double>));
  return t.to(dtype);
}

std::vector<double> to_doubles(const Tensor& t) {
  const Tensor c = t.to(DType::Float64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

std::vector<int64_t> to_int64s(const Tensor& t) {
  const Tensor c = t.to(DType::Int64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

std::vector<std::complex<double>> to_complexes(const Tensor& t) {
  const Tensor c = t.to(DType::Complex128).contiguous();
  const auto* p = c.data<std::complex<double>>();
  return std::vector<std::complex<double>>(p, p + c.numel());
}

std::vector<double> random_values(int64_t n, double lo, double hi, uint64_t seed,
                                  const std::vector<double>& specials) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v;
  v.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v.push_back(static_cast<size_t>(i) < specials.size() ? specials[static_cast<size_t>(i)] : dist(rng));
  }
  return v;
}

double round_to(DType dtype, double v) {
  const float f = static_cast<float>(v);
  switch (dtype) {
    case DType::Float64: return v;
    case DType::Float32: return f;
    case DType::Float16: return half_bits_to_float(float_to_half_bits(f));
    case DType::BFloat16: return bf16_bits_to_float(float_to_bf16_bits(f));
    case DType::Float8_e4m3fn: return fp8_e4m3fn_bits_to_float(float_to_fp8_e4m3fn_bits(f));
    case DType::Float8_e5m2: return fp8_e5m2_bits_to_float(float_to_fp8_e5m2_bits(f));
    default: return v;
  }
}

double compute_eps(DType t) { return t == DType::Float64 ? std::ldexp(1.0, -52) : std::ldexp(1.0, -23); }

double unit_roundoff(DType t) {
  switch (t) {
    case DType::Float16: return std::ldexp(1.0, -11);
    case DType::BFloat16: return std::ldexp(1.0, -8);
    case DType::Float8_e4m3fn: return std::ldexp(1.0, -4);
    case DType::Float8_e5m2: return std::ldexp(1.0, -3);
    default: return 0;
  }
}

double min_normal(DType t) {
  switch (t) {
    case DType::Float64: return std::numeric_limits<double>::min();
    case DType::Float16: return std::ldexp(1.0, -14);
    case DType::Float8_e4m3fn: return std::ldexp(1.0, -6);
    case DType::Float8_e5m2: return std::ldexp(1.0, -14);
    default: return std::numeric_limits<float>::min();  // f32, bf16
  }
}

::testing::AssertionResult close_to(double got, long double ref, DType out, double ulps) {
  const double stored = round_to(out, static_cast<double>(ref));
  if (std::isnan(ref) || std::isnan(stored)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << got << ", want NaN";
  }
  if (got == stored) return ::testing::AssertionSuccess();
  const long double tol = (ulps * compute_eps(out) + unit_roundoff(out)) * std::fabs(ref) + min_normal(out);
  if (std::isfinite(ref) && std::fabs(got - ref) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << std::setprecision(17) << "got " << got << ", want "
                                       << static_cast<double>(ref) << " (stored " << stored << ") within "
                                       << static_cast<double>(tol) << " (" << ulps << " ulp)";
}

void for_each_simd_target(const std::function<void()>& body) {
  simd_targets::for_each(cpu::elementwise_simd_targets(), body);
}

}  // namespace kiln::ew_test
