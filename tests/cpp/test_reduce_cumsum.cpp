// cumsum against a long-double (floats, complex) or wrapping int64 (integers)
// reference: every dtype, the size sweep, each dim of 3-D tensors, strided and
// broadcast views, the dtype argument, 0-dim and empty inputs, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <optional>

#include "kiln/ops/creation.h"
#include "kiln/ops/reduce.h"
#include "reduce_test_utils.h"

namespace kiln {
namespace {

using namespace reduce_test;

// Positions (row-major) of each line along `dim`, in order.
std::vector<std::vector<int64_t>> lines_along(const Shape& shape, int64_t dim) {
  std::vector<bool> reduced(shape.size(), false);
  reduced[dim] = true;
  return reduction_groups(shape, reduced);
}

void check(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt) {
  SCOPED_TRACE(input.describe() + " strides " + shape_to_string(input.strides()) + " dim " + std::to_string(dim));
  const Tensor out = cumsum(input, dim, dtype);
  const Tensor src = dtype ? input.to(*dtype) : input;
  const DType want = dtype ? *dtype : is_integral(input.dtype(), true) ? DType::Int64 : input.dtype();
  EXPECT_EQ(out.dtype(), want);
  EXPECT_EQ(out.sizes(), input.sizes());
  if (input.dim() == 0) {
    EXPECT_EQ(to_doubles(out), to_doubles(src));
    return;
  }
  const int64_t d = (dim % input.dim() + input.dim()) % input.dim();
  const auto lines = lines_along(input.sizes(), d);
  if (is_integral(src.dtype(), true)) {
    const auto x = to_int64s(src);
    Tensor expected = Tensor::empty(input.sizes(), DType::Int64);
    for (const auto& line : lines) {
      uint64_t acc = 0;  // wraps, like PyTorch's int64 running sum
      for (int64_t i : line) expected.data<int64_t>()[i] = static_cast<int64_t>(acc += static_cast<uint64_t>(x[i]));
    }
    EXPECT_EQ(to_int64s(out), to_int64s(expected.to(want)));
    return;
  }
  // The running sum is kept in double: after k terms |err| <= k eps64 sum|x_i|; the
  // stored value adds the output's rounding (or underflow).
  const double u = store_roundoff(want), eps64 = std::ldexp(1.0, -52);
  if (is_complex(src.dtype())) {
    const auto z = to_complex(src), got = to_complex(out);
    for (const auto& line : lines) {
      std::complex<long double> acc = 0;
      double abs_sum = 0;
      for (size_t k = 0; k < line.size(); ++k) {
        acc += std::complex<long double>(z[line[k]]);
        abs_sum += std::abs(z[line[k]]);
        const std::complex<double> ref(acc);
        const double tol = (k + 1) * eps64 * abs_sum + 2 * u * std::abs(ref) + store_underflow(want);
        EXPECT_NEAR(got[line[k]].real(), ref.real(), tol) << "position " << line[k];
        EXPECT_NEAR(got[line[k]].imag(), ref.imag(), tol) << "position " << line[k];
      }
    }
    return;
  }
  const auto x = to_doubles(src), got = to_doubles(out);
  for (const auto& line : lines) {
    long double acc = 0;
    double abs_sum = 0;
    for (size_t k = 0; k < line.size(); ++k) {
      acc += x[line[k]];
      abs_sum += std::abs(x[line[k]]);
      const double ref = static_cast<double>(acc);
      if (std::isnan(ref)) {
        EXPECT_TRUE(std::isnan(got[line[k]])) << "position " << line[k];
        continue;
      }
      const double tol = (k + 1) * eps64 * abs_sum + 2 * u * std::abs(ref) + store_underflow(want);
      EXPECT_NEAR(got[line[k]], ref, tol) << "position " << line[k];
    }
  }
}

const std::vector<DType> kDtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                    DType::Complex64, DType::Complex128, DType::Bool, DType::UInt8,
                                    DType::Int8, DType::Int32, DType::Int64, DType::UInt64};

TEST(ReduceCumsum, SizeSweepEveryDtype) {
  for (DType dt : kDtypes) {
    for (int64_t n : kSweepSizes) check(random_tensor({n}, dt, static_cast<uint32_t>(n)), 0);
  }
}

TEST(ReduceCumsum, EveryDimOf3dTensorsAndEveryLayout) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Complex64, DType::Int16, DType::Bool}) {
    for (const Shape& shape : {Shape{5, 7, 33}, Shape{3, 1, 300}, Shape{2, 600, 3}}) {
      const Tensor x = random_tensor(shape, dt, 3);
      for (int64_t dim : {0, 1, 2, -1, -3}) check(x, dim);
    }
    const Tensor transposed = random_tensor({33, 40}, dt, 4).t();
    const Tensor stepped = random_tensor({20, 50}, dt, 5).slice(1, 1, std::nullopt, 3);
    const Tensor expanded = random_tensor({1, 37}, dt, 6).expand({50, 37});
    for (const Tensor& v : {transposed, stepped, expanded}) {
      check(v, 0);
      check(v, 1);
    }
  }
  check(random_tensor({3, 100003}, DType::Float32, 7), 1);
  check(random_tensor({1000, 300}, DType::Float32, 8), 0);
}

TEST(ReduceCumsum, DtypeArgumentZeroDimEmptyAndNonFinite) {
  check(random_tensor({500}, DType::Int32, 9), 0, DType::Float64);
  check(random_tensor({500}, DType::Float32, 10), 0, DType::Float64);
  check(random_tensor({400}, DType::Int64, 11), 0, DType::Int8);  // wraps like PyTorch
  check(random_tensor({40, 3}, DType::Float64, 12), 0, DType::Float16);
  check(random_tensor({200}, DType::UInt8, 13), 0, DType::UInt8);
  check(scalar_tensor(2.5), 0);
  check(scalar_tensor(int64_t{7}), -1);
  EXPECT_EQ(cumsum(scalar_tensor(true), 0).dtype(), DType::Int64);
  check(zeros({0}), 0);
  check(zeros({3, 0}), 1);
  check(zeros({0, 4}, DType::Int32), 1);
  check(from_doubles({1.0, std::nan(""), 2.0}, {3}, DType::Float32), 0);
  const auto inf = cumsum(from_doubles({1.0, INFINITY, -INFINITY, 2.0}, {4}, DType::Float64), 0);
  EXPECT_EQ(to_doubles(inf)[1], INFINITY);
  EXPECT_TRUE(std::isnan(to_doubles(inf)[2]));
}

TEST(ReduceCumsum, Errors) {
  expect_error([] { cumsum(zeros({2, 3}), 2); }, ErrorKind::Index, "dimension out of range");
  expect_error([] { cumsum(zeros({2, 3}), -3); }, ErrorKind::Index, "dimension out of range");
  expect_error([] { cumsum(scalar_tensor(1.0), 1); }, ErrorKind::Index, "dimension out of range");
  expect_error([] { cumsum(Tensor(), 0); }, ErrorKind::Runtime, "undefined");
}

}  // namespace
}  // namespace kiln
