// var, std and norm (torch.linalg.vector_norm) against long-double references over the
// float and complex dtypes, the size sweep, 3-D dims, strided and broadcast views,
// corrections down to a zero divisor, every p, every SIMD target, and each error.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>

#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "reduce_test_utils.h"

namespace kiln {
namespace {

using namespace reduce_test;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every value as complex (real input: imaginary parts 0), so one reference serves both.
std::vector<std::complex<double>> as_complex(const Tensor& t) {
  if (is_complex(t.dtype())) return to_complex(t);
  std::vector<std::complex<double>> z;
  for (double v : to_doubles(t)) z.emplace_back(v, 0.0);
  return z;
}

std::vector<bool> reduced_flags(const Tensor& x, const DimList& dims) {
  return x.dim() == 0 ? std::vector<bool>() : flags(x.dim(), dims);
}

// The result of var/std over one group, in long double: two-pass.
long double reference_m2(const std::vector<std::complex<double>>& z, const std::vector<int64_t>& group) {
  std::complex<long double> mean = 0;
  for (int64_t i : group) mean += std::complex<long double>(z[i]);
  mean /= static_cast<long double>(group.size());
  long double m2 = 0;
  for (int64_t i : group) m2 += std::norm(std::complex<long double>(z[i]) - mean);
  return m2;
}

void check_var(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  SCOPED_TRACE(x.describe() + " strides " + shape_to_string(x.strides()) + " dims " + shape_to_string(dims) +
               " correction " + std::to_string(correction) + (keepdim ? " keepdim" : ""));
  const Tensor v = var(x, dims, correction, keepdim);
  const Tensor s = kiln::std(x, dims, correction, keepdim);
  const DType out_dtype = to_real(x.dtype());
  EXPECT_EQ(v.dtype(), out_dtype);
  EXPECT_EQ(s.dtype(), out_dtype);
  const auto groups = reduction_groups(x.sizes(), reduced_flags(x, dims));
  ASSERT_EQ(v.numel(), static_cast<int64_t>(groups.size()));
  const auto z = as_complex(x);
  const auto got_v = to_doubles(v), got_s = to_doubles(s);
  for (size_t o = 0; o < groups.size(); ++o) {
    const int64_t n = static_cast<int64_t>(groups[o].size());
    const long double m2 = n == 0 ? 0.0L : reference_m2(z, groups[o]);
    const double divisor = std::max(0.0, static_cast<double>(n) - correction);
    const double want_v = static_cast<double>(m2 / divisor), want_s = std::sqrt(want_v);
    if (std::isnan(want_v) || std::isinf(want_v)) {
      EXPECT_TRUE(std::isnan(want_v) ? std::isnan(got_v[o]) : got_v[o] == want_v) << "output " << o << " " << got_v[o];
      EXPECT_TRUE(std::isnan(want_s) ? std::isnan(got_s[o]) : got_s[o] == want_s) << "output " << o << " " << got_s[o];
      continue;
    }
    // Everything runs in float64: pairwise sums of n terms bounded by sum |x|^2 (the
    // mean's own rounding only enters squared), so |err(M2)| <= (12 + log2 n) eps64
    // sum |x|^2; then the divisor and the output's rounding.
    double sum_sq = 0;
    for (int64_t i : groups[o]) sum_sq += std::norm(z[i]);
    const double m2_tol = (12 + std::log2(static_cast<double>(std::max<int64_t>(n, 1)))) *
                          std::ldexp(1.0, -52) * sum_sq / divisor;
    const double u = store_roundoff(out_dtype);
    EXPECT_NEAR(got_v[o], want_v, m2_tol + 2 * u * want_v + store_underflow(out_dtype)) << "output " << o;
    // sqrt halves a relative error; near 0 the bound is sqrt of the absolute one.
    const double s_tol = want_s > 0 ? m2_tol / (2 * want_s) : std::sqrt(m2_tol);
    EXPECT_NEAR(got_s[o], want_s, s_tol + 2 * u * want_s + store_underflow(out_dtype)) << "output " << o;
  }
}

// Reference norm of one group, in long double.
long double reference_norm(const std::vector<std::complex<double>>& z, const std::vector<int64_t>& group, double p) {
  if (std::isinf(p)) {
    long double best = p > 0 ? 0.0L : kInf;
    for (int64_t i : group) {
      const long double a = std::abs(std::complex<long double>(z[i]));
      if (std::isnan(a)) return a;
      best = p > 0 ? std::max(best, a) : std::min(best, a);
    }
    return best;
  }
  long double acc = 0;
  for (int64_t i : group) {
    const long double a = std::abs(std::complex<long double>(z[i]));
    acc += p == 0 ? (a != 0) : std::pow(a, static_cast<long double>(p));
  }
  return p == 0 ? acc : std::pow(acc, 1.0L / p);
}

void check_norm(const Tensor& x, double p, const DimList& dims, bool keepdim) {
  SCOPED_TRACE(x.describe() + " strides " + shape_to_string(x.strides()) + " dims " + shape_to_string(dims) + " p " +
               std::to_string(p) + (keepdim ? " keepdim" : ""));
  const Tensor out = norm(x, p, dims, keepdim);
  const DType out_dtype = to_real(x.dtype());
  EXPECT_EQ(out.dtype(), out_dtype);
  const auto groups = reduction_groups(x.sizes(), reduced_flags(x, dims));
  ASSERT_EQ(out.numel(), static_cast<int64_t>(groups.size()));
  const auto z = as_complex(x);
  const auto got = to_doubles(out);
  for (size_t o = 0; o < groups.size(); ++o) {
    const double want = static_cast<double>(reference_norm(z, groups[o], p));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[o])) << "output " << o;
      continue;
    }
    if (std::isinf(to_doubles(from_doubles({want}, {1}, out_dtype))[0])) {  // overflows the output dtype
      EXPECT_EQ(got[o], kInf) << "output " << o;
      continue;
    }
    // Max, min and counts are exact; sums of n non-negative terms carry a relative
    // error of at most (10 + log2 n) eps of the accumulating dtype (one more eps for
    // each term's |z|), which the p-th root divides by |p|.
    double rel = 0;
    if (!std::isinf(p) && p != 0) {
      const double n = static_cast<double>(std::max<size_t>(groups[o].size(), 1));
      rel = (11 + std::log2(n)) * accumulate_eps(x.dtype()) / std::min(std::abs(p), 1.0);
    }
    const double tol = (rel + 2 * store_roundoff(out_dtype)) * std::abs(want) + store_underflow(out_dtype);
    EXPECT_NEAR(got[o], want, tol) << "output " << o;
  }
}

const std::vector<DType> kDtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                    DType::Complex64, DType::Complex128};
const std::vector<double> kPs = {2.0, 1.0, kInf, -kInf, 0.0, 3.0, 0.5, -1.0};

TEST(ReduceVar, SizeSweepEveryDtype) {
  for (DType dt : kDtypes) {
    for (int64_t n : kSweepSizes) {
      // An offset mean checks that the deviations are taken from an accurate mean.
      const Tensor x = is_complex(dt) ? random_tensor({n}, dt, static_cast<uint32_t>(n))
                                      : from_doubles(random_values(n, static_cast<uint32_t>(n), 9.0, 11.0), {n}, dt);
      check_var(x, {}, 1.0, false);
      check_var(x, {0}, 0.0, true);
    }
  }
}

TEST(ReduceVar, EveryTarget) {
  for_each_target([] {
    for (DType dt : {DType::Float32, DType::Float64}) {
      for (int64_t n : {1, 3, 4, 5, 8, 9, 16, 17, 33, 65, 1000}) {
        check_var(random_tensor({n}, dt, 3), {}, 1.0, false);
        check_var(random_tensor({n, 37}, dt, 4), {0}, 1.0, false);  // columns
      }
    }
  });
}

TEST(ReduceVar, DimsLayoutsAndLargeShapes) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Complex64}) {
    for (const Shape& shape : {Shape{5, 7, 33}, Shape{3, 4, 5}}) {
      const Tensor x = random_tensor(shape, dt, 7);
      for (const DimList& dims : {DimList{0}, DimList{1}, DimList{2}, DimList{0, 2}, DimList{1, 2}, DimList{}}) {
        check_var(x, dims, 1.0, false);
        check_var(x, dims, 0.0, true);
      }
    }
    check_var(random_tensor({33, 40}, dt, 8).t(), {0}, 1.0, false);
    check_var(random_tensor({33, 40}, dt, 8).t(), {1}, 1.0, false);
    check_var(random_tensor({20, 50}, dt, 9).slice(1, 0, std::nullopt, 4), {1}, 1.0, false);
    check_var(random_tensor({1, 37}, dt, 10).expand({50, 37}), {0}, 1.0, false);  // zero spread
    check_var(random_tensor({3, 100003}, dt, 11), {1}, 1.0, false);
    check_var(random_tensor({5000, 20}, dt, 12), {0}, 1.0, true);
  }
}

TEST(ReduceVar, CorrectionsAndZeroDivisors) {
  const Tensor x = from_doubles({1.0, 2.0, 4.0}, {3}, DType::Float32);
  for (double c : {0.0, 1.0, 2.0, 2.5, 3.0, 4.0, -1.0}) check_var(x, {}, c, false);
  EXPECT_EQ(var(x, {}, 3.0).item().to_double(), kInf);                          // divisor 0
  EXPECT_TRUE(std::isnan(var(scalar_tensor(2.0)).item().to_double()));          // 0 / 0
  EXPECT_TRUE(std::isnan(kiln::std(zeros({0})).item().to_double()));            // empty
  EXPECT_EQ(var(full({4}, Scalar(3.0)), {}, 0.0).item().to_double(), 0.0);      // exact zero spread
  EXPECT_TRUE(std::isnan(var(from_doubles({1.0, kInf}, {2}, DType::Float64)).item().to_double()));
  EXPECT_TRUE(std::isnan(var(from_doubles({1.0, std::nan("")}, {2}, DType::Float32)).item().to_double()));
  check_var(zeros({4, 0}), {1}, 1.0, false);
  check_var(scalar_tensor(2.0), {0}, 0.0, false);
}

TEST(ReduceVar, Errors) {
  for (DType dt : {DType::Int32, DType::Bool, DType::UInt8}) {
    expect_error([&] { var(zeros({3}, dt)); }, ErrorKind::Type, "std and var only support floating point and complex dtypes");
    expect_error([&] { kiln::std(zeros({3}, dt)); }, ErrorKind::Type, "std and var only support");
  }
  expect_error([] { var(zeros({2, 2}), {0, 0}); }, ErrorKind::Runtime, "dim 0 appears multiple times");
  expect_error([] { kiln::std(zeros({2, 2}), {2}); }, ErrorKind::Index, "dimension out of range");
}

TEST(ReduceNorm, SizeSweepEveryDtypeAndP) {
  for (DType dt : kDtypes) {
    for (int64_t n : kSweepSizes) {
      const Tensor x = random_tensor({n}, dt, static_cast<uint32_t>(n) + 1);
      for (double p : kPs) {
        if (n == 0 && (p < 0 || p == kInf)) continue;  // no identity: an error, checked below
        check_norm(x, p, {}, false);
      }
    }
  }
}

TEST(ReduceNorm, EveryTarget) {
  for_each_target([] {
    for (DType dt : {DType::Float32, DType::Float64, DType::Complex64}) {
      for (int64_t n : {1, 3, 4, 5, 8, 9, 16, 17, 33, 65, 1000}) {
        for (double p : {2.0, 1.0, kInf, -kInf, 0.0}) {
          check_norm(random_tensor({n}, dt, 5), p, {}, false);
          check_norm(random_tensor({n, 19}, dt, 6), p, {0}, false);
        }
      }
    }
  });
}

TEST(ReduceNorm, DimsLayoutsZerosAndNaN) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::Complex128}) {
    const Tensor x = random_tensor({5, 7, 33}, dt, 8);
    for (const DimList& dims : {DimList{0}, DimList{2}, DimList{0, 1}, DimList{1, 2}, DimList{}}) {
      for (double p : kPs) check_norm(x, p, dims, dims.size() == 1);
    }
    for (double p : kPs) {
      check_norm(random_tensor({33, 40}, dt, 9).t(), p, {0}, false);
      check_norm(random_tensor({20, 50}, dt, 10).slice(1, 0, std::nullopt, 3), p, {1}, false);
      check_norm(random_tensor({1, 37}, dt, 11).expand({50, 37}), p, {}, false);
    }
  }
  // Zeros: count of nonzeros, and p < 0 with a zero gives 0.
  std::vector<double> v = random_values(100, 12);
  for (int i = 0; i < 100; i += 7) v[i] = 0.0;
  const Tensor with_zeros = from_doubles(v, {100}, DType::Float32);
  for (double p : kPs) check_norm(with_zeros, p, {}, false);
  EXPECT_EQ(norm(with_zeros, 0.0).item().to_double(), 85.0);
  EXPECT_EQ(norm(with_zeros, -1.0).item().to_double(), 0.0);
  v[50] = std::nan("");
  const Tensor with_nan = from_doubles(v, {100}, DType::Float32);
  for (double p : kPs) {
    if (p != 0) EXPECT_TRUE(std::isnan(norm(with_nan, p).item().to_double())) << p;
  }
  EXPECT_EQ(norm(with_nan, 0.0).item().to_double(), 85.0);  // NaN is nonzero
  check_norm(random_tensor({3, 100003}, DType::Float32, 13), 2.0, {1}, false);
  check_norm(random_tensor({5000, 20}, DType::Float32, 14), 1.0, {0}, false);
  EXPECT_EQ(norm(zeros({0}), 2.0).item().to_double(), 0.0);
  EXPECT_EQ(norm(zeros({3, 0}), 1.0, {1}).sizes(), (Shape{3}));
}

TEST(ReduceNorm, Errors) {
  expect_error([] { norm(zeros({3}, DType::Int64)); }, ErrorKind::Type,
               "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long");
  expect_error([] { norm(zeros({0}), kInf); }, ErrorKind::Runtime,
               "linalg.vector_norm: cannot compute the inf norm on an empty tensor because the operation does not "
               "have an identity");
  expect_error([] { norm(zeros({0}), -2.0); }, ErrorKind::Runtime, "cannot compute the -2 norm on an empty tensor");
  expect_error([] { norm(zeros({3, 0}), -kInf, {1}); }, ErrorKind::Runtime,
               "cannot compute the -inf norm on the dimension 1 because this dimension is empty");
  expect_error([] { norm(zeros({2}), 2.0, {0, -1}); }, ErrorKind::Runtime, "dim 0 appears multiple times");
}

}  // namespace
}  // namespace kiln
