// sum, mean and prod against a plain reference (compensated long-double sums, long
// double products) over every dtype, the size sweep, each dim and dim set of 3-D
// tensors, strided, transposed and broadcast views, every SIMD target, thread counts,
// and each error.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <optional>

#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "kiln/thread_pool.h"
#include "reduce_test_utils.h"

namespace kiln {
namespace {

using namespace reduce_test;

enum class Op { Sum, Mean, Prod };

Shape expected_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor run(Op op, const Tensor& input, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  switch (op) {
    case Op::Sum: return sum(input, dims, keepdim, dtype);
    case Op::Mean: return mean(input, dims, keepdim, dtype);
    default: return prod(input, dims, keepdim, dtype);
  }
}

// Relative error bound of a product of n terms: one rounding per multiply (n in all,
// and at most 16 more combining lanes and blocks), complex multiplies costing up to
// four; plus the output's rounding (or underflow).
double prod_tolerance(DType dtype, int64_t n, double magnitude) {
  const double per_multiply = is_complex(dtype) ? 4.0 : 1.0;
  return ((static_cast<double>(n) + 16.0) * per_multiply * accumulate_eps(dtype) + 2 * store_roundoff(dtype)) *
             magnitude + store_underflow(dtype) + 1e-300;
}

void check(Op op, const Tensor& input, const DimList& dims, bool keepdim,
           std::optional<DType> dtype = std::nullopt) {
  SCOPED_TRACE(input.describe() + " strides " + shape_to_string(input.strides()) + " dims " + shape_to_string(dims) +
               (keepdim ? " keepdim" : ""));
  const Tensor out = run(op, input, dims, keepdim, dtype);
  const Tensor src = dtype ? input.to(*dtype) : input;
  const DType want = dtype ? *dtype : is_integral(input.dtype(), true) ? DType::Int64 : input.dtype();
  EXPECT_EQ(out.dtype(), want);
  const auto reduced = input.dim() == 0 ? std::vector<bool>() : flags(input.dim(), dims);
  ASSERT_EQ(out.sizes(), expected_shape(input.sizes(), reduced, keepdim));
  const auto groups = reduction_groups(input.sizes(), reduced);
  ASSERT_EQ(out.numel(), static_cast<int64_t>(groups.size()));

  if (is_integral(src.dtype(), true)) {
    const auto x = to_int64s(src);
    std::vector<int64_t> expected;
    for (const auto& g : groups) {
      uint64_t acc = op == Op::Prod ? 1 : 0;  // int64 results wrap
      for (int64_t i : g) acc = op == Op::Prod ? acc * static_cast<uint64_t>(x[i]) : acc + static_cast<uint64_t>(x[i]);
      expected.push_back(static_cast<int64_t>(acc));
    }
    Tensor e = Tensor::empty({static_cast<int64_t>(expected.size())}, DType::Int64);
    std::copy(expected.begin(), expected.end(), e.data<int64_t>());
    EXPECT_EQ(to_int64s(out), to_int64s(e.to(want)));
    return;
  }
  if (is_complex(src.dtype())) {
    const auto z = to_complex(src), got = to_complex(out);
    for (size_t o = 0; o < groups.size(); ++o) {
      std::vector<std::complex<double>> terms;
      double magnitude = 0;
      std::complex<long double> product = 1;
      for (int64_t i : groups[o]) {
        terms.push_back(z[i]);
        magnitude += std::abs(z[i]);
        product *= std::complex<long double>(z[i]);
      }
      const double n = static_cast<double>(terms.size());
      std::complex<double> ref;
      double tol;
      if (op == Op::Prod) {
        ref = std::complex<double>(product);
        tol = prod_tolerance(src.dtype(), groups[o].size(), std::abs(ref));
      } else {
        ref = accurate_sum(terms);
        tol = sum_tolerance(src.dtype(), groups[o].size(), magnitude, std::abs(ref));
        if (op == Op::Mean) {
          ref /= n;
          tol = tol / n + 2 * store_roundoff(src.dtype()) * std::abs(ref);
        }
      }
      if (op == Op::Mean && terms.empty()) {
        EXPECT_TRUE(std::isnan(got[o].real()) && std::isnan(got[o].imag()));
        continue;
      }
      EXPECT_NEAR(got[o].real(), ref.real(), tol) << "output " << o;
      EXPECT_NEAR(got[o].imag(), ref.imag(), tol) << "output " << o;
    }
    return;
  }
  const auto x = to_doubles(src), got = to_doubles(out);
  for (size_t o = 0; o < groups.size(); ++o) {
    std::vector<double> terms;
    double abs_sum = 0;
    long double product = 1;
    for (int64_t i : groups[o]) {
      terms.push_back(x[i]);
      abs_sum += std::abs(x[i]);
      product *= x[i];
    }
    const double n = static_cast<double>(terms.size());
    double ref, tol;
    if (op == Op::Prod) {
      ref = static_cast<double>(product);
      tol = prod_tolerance(src.dtype(), groups[o].size(), std::abs(ref));
    } else {
      ref = accurate_sum(terms);
      tol = sum_tolerance(src.dtype(), groups[o].size(), abs_sum, ref);
      if (op == Op::Mean) {
        if (terms.empty()) {
          EXPECT_TRUE(std::isnan(got[o])) << "output " << o;
          continue;
        }
        ref /= n;
        tol = tol / n + 2 * store_roundoff(src.dtype()) * std::abs(ref);
      }
    }
    EXPECT_NEAR(got[o], ref, tol) << "output " << o;
  }
}

const std::vector<DType> kFloatDtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                         DType::Complex64, DType::Complex128};
const std::vector<DType> kIntDtypes = {DType::Bool,  DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64,
                                       DType::Int8,  DType::Int16, DType::Int32,  DType::Int64};

// Values in [0.95, 1.05] (and complex ones near the unit circle) keep long products finite.
Tensor prod_friendly(const Shape& shape, DType dtype, uint32_t seed) {
  if (is_complex(dtype)) {
    const auto angle = random_values(shape_numel(shape), seed, -3.0, 3.0);
    const auto radius = random_values(shape_numel(shape), seed + 1, 0.95, 1.05);
    std::vector<std::complex<double>> z;
    for (size_t i = 0; i < angle.size(); ++i) z.push_back(std::polar(radius[i], angle[i]));
    return from_complex(z, shape, dtype);
  }
  return from_doubles(random_values(shape_numel(shape), seed, 0.95, 1.05), shape, dtype);
}

TEST(ReduceSum, SizeSweepEveryFloatDtypeOnEveryTarget) {
  for_each_target([] {
    for (DType dt : kFloatDtypes) {
      for (int64_t n : kSweepSizes) {
        const Tensor x = random_tensor({n}, dt, static_cast<uint32_t>(n) + 7);
        check(Op::Sum, x, {}, false);
        check(Op::Mean, x, {0}, true);
        check(Op::Prod, prod_friendly({n}, dt, static_cast<uint32_t>(n)), {}, false);
      }
    }
  });
}

// Column kernels: widths around every vector group size (4 vectors, 1 vector, single
// lanes) and past one column block, heights around the pairwise leaf.
TEST(ReduceSum, ColumnWidthsOnEveryTarget) {
  for_each_target([] {
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::Complex64}) {
      for (int64_t w : {8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 257, 600}) {
        for (int64_t rows : {1, 3, 16, 17, 200}) {
          check(Op::Sum, random_tensor({rows, w}, dt, static_cast<uint32_t>(w * rows)), {0}, false);
          check(Op::Prod, prod_friendly({rows, w}, dt, static_cast<uint32_t>(w)), {0}, true);
        }
      }
    }
  });
}

TEST(ReduceSum, SizeSweepIntegersAccumulateInInt64) {
  for (DType dt : kIntDtypes) {
    for (int64_t n : kSweepSizes) {
      check(Op::Sum, random_tensor({n}, dt, static_cast<uint32_t>(n)), {}, false);
      // Small factors: the int64 product wraps for long rows, as PyTorch's does.
      const bool sign = !is_unsigned(dt) && dt != DType::Bool;
      check(Op::Prod, from_doubles(random_values(n, 3, sign ? -3.0 : 0.0, 3.0, true), {n}, dt), {}, false);
    }
  }
}

TEST(ReduceSum, IntegerSumsWrapAndKeepUInt64Bits) {
  Tensor big = full({4}, Scalar(INT64_MAX), DType::Int64);
  EXPECT_EQ(sum(big).item().to_int64(), static_cast<int64_t>(4 * static_cast<uint64_t>(INT64_MAX)));
  Tensor u = full({3}, Scalar(uint64_t{1} << 63), DType::UInt64);
  EXPECT_EQ(sum(u).item().to_int64(), INT64_MIN);  // 3 * 2^63 mod 2^64, as int64
  EXPECT_EQ(sum(full({300}, Scalar(int64_t{100}), DType::Int8)).item().to_int64(), 30000);
  EXPECT_EQ(sum(ones({10}, DType::Bool)).dtype(), DType::Int64);
}

TEST(ReduceSum, EveryDimAndDimSetOf3dTensors) {
  const std::vector<DimList> dim_sets = {{0}, {1}, {2}, {-1}, {0, 1}, {0, 2}, {1, 2}, {2, 0}, {}, {0, 1, 2}};
  for (const Shape& shape : {Shape{5, 7, 33}, Shape{3, 4, 5}, Shape{2, 130, 3}}) {
    for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Complex64, DType::Int32, DType::Bool}) {
      const Tensor x = random_tensor(shape, dt, 11);
      for (const DimList& dims : dim_sets) {
        for (bool keepdim : {false, true}) {
          check(Op::Sum, x, dims, keepdim);
          if (!is_integral(dt, true)) check(Op::Mean, x, dims, keepdim);
          check(Op::Prod, is_integral(dt, true) ? x : prod_friendly(shape, dt, 5), dims, keepdim);
        }
      }
    }
  }
}

TEST(ReduceSum, NonContiguousAndBroadcastInputs) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::Complex128, DType::Int16}) {
    const Tensor base = random_tensor({33, 40}, dt, 21);
    const Tensor transposed = base.t();
    const Tensor stepped = random_tensor({20, 50}, dt, 22).slice(1, 1, std::nullopt, 3);
    const Tensor permuted = random_tensor({6, 7, 40}, dt, 23).permute({2, 0, 1});
    const Tensor rows = random_tensor({1, 37}, dt, 24).expand({50, 37});
    const Tensor cols = random_tensor({45, 1}, dt, 25).expand({45, 20});
    for (const Tensor& x : {transposed, stepped, rows, cols}) {
      for (const DimList& dims : {DimList{0}, DimList{1}, DimList{}}) {
        check(Op::Sum, x, dims, false);
        if (!is_integral(dt)) check(Op::Mean, x, dims, true);
      }
    }
    for (const DimList& dims : {DimList{0}, DimList{1}, DimList{2}, DimList{0, 2}, DimList{}}) {
      check(Op::Sum, permuted, dims, false);
    }
    // Reduced dims that do not merge, under contiguous columns and contiguous rows.
    const Tensor split = random_tensor({4, 6, 40}, dt, 26).slice(0, 0, std::nullopt, 2);
    check(Op::Sum, split, {0, 1}, false);
    check(Op::Prod, split, {0, 2}, true);
    check(Op::Sum, random_tensor({30, 50}, dt, 27).slice(0, 0, std::nullopt, 3), {}, false);
  }
  EXPECT_DOUBLE_EQ(sum(scalar_tensor(2.5).expand({1000})).item().to_double(), 2500.0);
}

TEST(ReduceSum, LargeShapesUseEveryStrategyAndThread) {
  for (DType dt : {DType::Float32, DType::Float16, DType::Float64}) {
    check(Op::Sum, random_tensor({3, 100003}, dt, 31), {1}, false);     // few long rows
    check(Op::Sum, random_tensor({100003, 3}, dt, 32), {0}, false);     // copied, then rows
    check(Op::Sum, random_tensor({2000, 64}, dt, 33), {0}, false);      // one column block, split rows
    check(Op::Sum, random_tensor({300, 2, 600}, dt, 34), {0, 1}, true); // many column blocks
    check(Op::Mean, random_tensor({70000, 2}, dt, 35).t(), {1}, false);
  }
}

TEST(ReduceSum, ResultsDoNotDependOnTheThreadCount) {
  const std::vector<std::pair<Tensor, DimList>> cases = {
      {random_tensor({100003}, DType::Float32, 41), {}},
      {random_tensor({3, 100003}, DType::Float32, 42), {1}},
      {random_tensor({5000, 40}, DType::Float32, 43), {0}},
      {random_tensor({400, 300}, DType::Float64, 44).t(), {}},
  };
  std::vector<std::vector<double>> first;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto got = to_doubles(sum(cases[c].first, cases[c].second));
      if (threads == 1) {
        first.push_back(got);
      } else {
        EXPECT_EQ(got, first[c]) << "case " << c << " with " << threads << " threads";
      }
    }
  }
  set_num_threads(default_num_threads());
}

TEST(ReduceSum, DtypeArgumentConvertsTheInputFirst) {
  const Tensor ints = random_tensor({500}, DType::Int32, 51);
  check(Op::Sum, ints, {}, false, DType::Float64);
  check(Op::Mean, ints, {}, false, DType::Float32);
  check(Op::Sum, random_tensor({300}, DType::Float32, 52), {}, false, DType::Float16);
  check(Op::Sum, random_tensor({300}, DType::Int64, 53), {}, false, DType::Int8);  // wraps like PyTorch
  check(Op::Prod, random_tensor({7}, DType::Int32, 54), {}, false, DType::Int16);
  EXPECT_EQ(sum(ones({3}), {}, false, DType::Complex64).dtype(), DType::Complex64);
}

TEST(ReduceSum, ZeroDimAndEmptyInputs) {
  const Tensor s = scalar_tensor(3.5);
  EXPECT_EQ(sum(s).item().to_double(), 3.5);
  EXPECT_EQ(sum(s, {0}).item().to_double(), 3.5);
  EXPECT_EQ(sum(s, {-1}, true).dim(), 0);
  EXPECT_EQ(prod(s, {0}).item().to_double(), 3.5);
  EXPECT_EQ(sum(zeros({0})).item().to_double(), 0.0);
  EXPECT_EQ(prod(zeros({0})).item().to_double(), 1.0);
  EXPECT_TRUE(std::isnan(mean(zeros({0})).item().to_double()));
  EXPECT_EQ(sum(zeros({0}, DType::Int32)).dtype(), DType::Int64);
  for (DType dt : {DType::Float32, DType::Int64, DType::Complex64}) {
    const Tensor e = zeros({3, 0}, dt);
    check(Op::Sum, e, {1}, false);
    check(Op::Prod, e, {1}, true);
    check(Op::Sum, e, {0}, false);  // no outputs
    if (dt != DType::Int64) check(Op::Mean, e, {1}, false);
  }
}

TEST(ReduceSum, NonFiniteValuesPropagate) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    for (int64_t n : {1, 9, 100, 40000}) {
      std::vector<double> v(static_cast<size_t>(n), 1.0);
      v[n / 2] = nan;
      EXPECT_TRUE(std::isnan(sum(from_doubles(v, {n}, dt)).item().to_double()));
      v[n / 2] = inf;
      EXPECT_EQ(sum(from_doubles(v, {n}, dt)).item().to_double(), inf);
      EXPECT_EQ(prod(from_doubles(v, {n}, dt)).item().to_double(), inf);
      if (n > 1) {
        v[0] = -inf;
        EXPECT_TRUE(std::isnan(sum(from_doubles(v, {n}, dt)).item().to_double()));
      }
    }
  }
}

TEST(ReduceSum, Float8InputsComputeInFloat32) {
  for (DType dt : {DType::Float8_e4m3fn, DType::Float8_e5m2}) {
    const Tensor x = from_doubles(random_values(200, 61, -2.0, 2.0), {10, 20}, dt);
    for (const DimList& dims : {DimList{0}, DimList{1}, DimList{}}) {
      check(Op::Sum, x, dims, false);
      check(Op::Mean, x, dims, false);
    }
  }
}

TEST(ReduceSum, Errors) {
  const Tensor x = zeros({2, 3});
  expect_error([&] { sum(x, {0, -2}); }, ErrorKind::Runtime, "dim 0 appears multiple times in the list of dims");
  expect_error([&] { prod(x, {1, 1}); }, ErrorKind::Runtime, "dim 1 appears multiple times");
  expect_error([&] { sum(x, {2}); }, ErrorKind::Index, "dimension out of range");
  expect_error([&] { mean(x, {-3}); }, ErrorKind::Index, "dimension out of range");
  expect_error([&] { sum(scalar_tensor(1.0), {1}); }, ErrorKind::Index, "dimension out of range");
  expect_error([&] { mean(zeros({3}, DType::Int64)); }, ErrorKind::Type,
               "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
               "Got: Long");
  expect_error([&] { mean(zeros({3}, DType::Bool)); }, ErrorKind::Type, "Got: Bool");
  expect_error([&] { mean(x, {}, false, DType::Int32); }, ErrorKind::Type,
               "mean(): could not infer output dtype. Optional dtype must be either a floating point or complex "
               "dtype. Got: Int");
  expect_error([&] { sum(Tensor()); }, ErrorKind::Runtime, "undefined");
}

}  // namespace
}  // namespace kiln
