// softmax / log_softmax against a plain double-precision reference: sizes around the
// SIMD widths and the 1024-element blocks, rows long enough to be split across
// threads, every dim of 3-D inputs (the strided column path), non-contiguous views,
// -inf / NaN / +inf / huge values, narrow dtypes, the `dtype` argument, and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/nn/softmax_kernels.h"
#include "kiln/ops/nn.h"
#include "kiln/thread_pool.h"
#include "nn_test_utils.h"

namespace kiln {
namespace {

using nn_test::compute_roundoff;
using nn_test::expect_error;
using nn_test::for_each_target;
using nn_test::from_doubles;
using nn_test::near;
using nn_test::random_sample;
using nn_test::to_doubles;
using nn_test::unit_roundoff;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The reference for one row, with each output's tolerance.
struct RowRef {
  std::vector<double> out;
  std::vector<double> tol;
};

// Softmax of x in double, with PyTorch's special values: a NaN anywhere or a row of
// only -inf (or containing +inf, as e^(inf - inf) is NaN) gives NaN everywhere.
//
// Tolerance, with u the unit roundoff of the compute dtype (2^-24 for float32 and the
// narrow dtypes, 2^-53 for float64):
//  - e^(x - R) is within 2 ulp (4u) of exact, and x - R itself is rounded, a relative
//    error of |x - R| u <= |x - M| u in the result (R is a running max <= M);
//  - the sum S: every term's error (weighted by p_i: sum p_i (|x_i - M| + 4) u), plus
//    lane accumulation: at most 1024 / 4 = 256 sequential adds per lane (the 1-lane
//    scalar target) and ~10 more to combine lanes; blocks add in double;
//  - softmax: one rounding of the factor e^(R - M) / S and one of the product (2u);
//    log_softmax: (x - R) rounded (u |x - M|, plus R's distance from M) and minus
//    log S rounded (u |out|), plus S's relative error as an absolute one;
//  - narrow outputs round once more (their unit roundoff, relative, or half a
//    subnormal where float16 underflows);
//  - results under 2.5e-38 may flush to 0 (fast exp's normal range).
RowRef reference_row(const std::vector<double>& x, bool log, DType out_dtype, DType compute_for) {
  const size_t n = x.size();
  RowRef r{std::vector<double>(n), std::vector<double>(n, 0.0)};
  double m = -kInf;
  bool nan = false;
  for (double v : x) {
    nan = nan || std::isnan(v) || v == kInf;
    m = std::max(m, v);
  }
  if (nan || m == -kInf) {
    std::fill(r.out.begin(), r.out.end(), kNaN);
    return r;
  }
  // The reference sums in long double (64-bit mantissa), so its own error stays far
  // below float64's tolerance even for 10^5 terms.
  long double s = 0.0L;
  for (double v : x) s += std::exp(static_cast<long double>(v) - m);
  double weighted = 0.0;
  for (double v : x) {
    if (v != -kInf) weighted += static_cast<double>(std::exp(static_cast<long double>(v) - m) / s) * std::fabs(v - m);
  }
  const double u = compute_roundoff(compute_for);
  const double sum_rel = (weighted + 4 + 256 + 10) * u;
  const long double c = m + std::log(s);
  for (size_t i = 0; i < n; ++i) {
    if (log) {
      r.out[i] = static_cast<double>((x[i] - m) - std::log(s));
      // Past the dtype's range the true value rounds to -inf (x - max overflows).
      if (r.out[i] < -nn_test::max_finite(compute_for)) r.out[i] = -kInf;
      r.tol[i] = u * (std::fabs(x[i] - m) + 1 + std::fabs(r.out[i])) + sum_rel +
                 unit_roundoff(out_dtype) * std::fabs(r.out[i]);
    } else {
      r.out[i] = static_cast<double>(std::exp(x[i] - c));
      const double rel = (std::fabs(x[i] - m) + 4 + 2) * u + sum_rel + unit_roundoff(out_dtype);
      r.tol[i] = x[i] == -kInf ? 0.0 : r.out[i] * rel + 2.5e-38 + nn_test::underflow_error(out_dtype);
    }
  }
  return r;
}

// Checks softmax(input, dim) (or log_softmax) against the reference applied along dim.
void check_softmax(const Tensor& input, const std::vector<double>& values, int64_t dim, bool log,
                   DType out_dtype, DType compute_for, const Tensor& got) {
  ASSERT_EQ(got.sizes(), input.sizes());
  ASSERT_EQ(got.dtype(), out_dtype);
  const std::vector<double> y = to_doubles(got);
  const Shape shape = input.dim() == 0 ? Shape{1} : input.sizes();
  const int64_t d = input.dim() == 0 ? 0 : (dim % input.dim() + input.dim()) % input.dim();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= shape[i];
  for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t size = shape[d];
  int failures = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      std::vector<double> row(size);
      for (int64_t k = 0; k < size; ++k) row[k] = values[(o * size + k) * inner + j];
      const RowRef ref = reference_row(row, log, out_dtype, compute_for);
      for (int64_t k = 0; k < size && failures < 5; ++k) {
        const auto ok = near(y[(o * size + k) * inner + j], ref.out[k], ref.tol[k]);
        if (!ok) {
          ++failures;
          ADD_FAILURE() << "row (" << o << ", " << j << ") element " << k << " of " << size << ": " << ok.message();
        }
      }
    }
  }
}

void check_op(const Tensor& input, const std::vector<double>& values, int64_t dim, bool log) {
  const Tensor got = log ? log_softmax(input, dim) : softmax(input, dim);
  check_softmax(input, values, dim, log, input.dtype(), input.dtype(), got);
}

// Sizes around every SIMD width (up to 16 lanes), the 1024-element blocks, and rows long
// enough to be split across threads (>= 24576) with a ragged end.
const std::vector<int64_t> kRowSizes = {1,    2,    3,    4,    5,    7,    8,    9,     15,    16,    17,
                                        31,   32,   33,   63,   64,   65,   1000,  1023,  1024,  1025,
                                        2049, 4097, 32768, 100003, 128256};

TEST(SoftmaxRows, Float32EveryTargetAndSize) {
  for_each_target(cpu::softmax_simd_targets(), [] {
    for (int64_t n : kRowSizes) {
      SCOPED_TRACE("n = " + std::to_string(n));
      // Spread of 20: probabilities span e^-40, so the exp's whole range is exercised.
      const auto s = random_sample({1, n}, DType::Float32, static_cast<uint32_t>(n), -20, 20);
      check_op(s.tensor, s.values, -1, false);
      check_op(s.tensor, s.values, -1, true);
    }
  });
}

TEST(SoftmaxRows, ManyRowsThreadedFloat64) {
  for_each_target(cpu::softmax_simd_targets(), [] {
    for (int64_t n : {1, 7, 17, 1025}) {
      const auto s = random_sample({301, n}, DType::Float64, 7, -30, 30);
      check_op(s.tensor, s.values, 1, false);
      check_op(s.tensor, s.values, 1, true);
    }
    const auto s = random_sample({2, 100003}, DType::Float64, 8, -30, 30);
    check_op(s.tensor, s.values, -1, false);
    check_op(s.tensor, s.values, -1, true);
  });
}

TEST(SoftmaxRows, NarrowDtypes) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    for (int64_t n : {1, 17, 1000, 40000}) {
      const auto s = random_sample({3, n}, dt, 11, -8, 8);
      check_op(s.tensor, s.values, -1, false);
      check_op(s.tensor, s.values, -1, true);
    }
    // One long row: the split path stages each piece through float32.
    const auto s = random_sample({1, 100003}, dt, 12, -8, 8);
    check_op(s.tensor, s.values, -1, false);
    check_op(s.tensor, s.values, -1, true);
  }
}

TEST(SoftmaxDims, EveryDimOf3D) {
  for_each_target(cpu::softmax_simd_targets(), [] {
    for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)));
      // Inner sizes 33 * 5 and 5 cover full and partial column groups.
      const auto s = random_sample({4, 33, 5}, dt, 3, -10, 10);
      for (int64_t dim : {0, 1, 2, -1, -2, -3}) {
        SCOPED_TRACE("dim " + std::to_string(dim));
        check_op(s.tensor, s.values, dim, false);
        check_op(s.tensor, s.values, dim, true);
      }
    }
  });
}

TEST(SoftmaxDims, LongStridedColumns) {
  // 3000 rows down each column: the column sums flush to double every 1024 rows.
  const auto s = random_sample({3000, 70}, DType::Float32, 5, -10, 10);
  check_op(s.tensor, s.values, 0, false);
  check_op(s.tensor, s.values, 0, true);
}

TEST(SoftmaxDims, NonContiguousInputs) {
  const auto s = random_sample({6, 50, 9}, DType::Float32, 9, -5, 5);
  const Tensor transposed = s.tensor.transpose(0, 2);  // [9, 50, 6]
  const Tensor stepped = s.tensor.slice(1, 1, 50, 3);  // [6, 17, 9]
  for (const Tensor& view : {transposed, stepped}) {
    const std::vector<double> values = to_doubles(view);
    for (int64_t dim : {0, 1, 2}) {
      check_op(view, values, dim, false);
      check_op(view, values, dim, true);
    }
  }
  // A broadcast (stride 0) input.
  const Tensor row = from_doubles(nn_test::uniform(40, 3, -3, 3), {1, 40}, DType::Float32);
  const Tensor expanded = row.expand({5, 40});
  check_op(expanded, to_doubles(expanded), 1, false);
}

TEST(SoftmaxSpecialValues, InfinityAndNaN) {
  for_each_target(cpu::softmax_simd_targets(), [] {
    for (int64_t n : {1, 5, 40, 3000, 70001}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      std::vector<double> base = nn_test::uniform(n, 21, -4, 4);
      // A row of only -inf: NaN (e^(-inf - -inf)), as PyTorch.
      std::vector<double> all_inf(n, -kInf);
      // Some -inf, including the whole first half (a split row's first piece, and
      // leading blocks whose running max stays -inf): those give 0 / -inf.
      std::vector<double> half_inf = base;
      for (int64_t i = 0; i < n / 2; ++i) half_inf[i] = -kInf;
      half_inf[n - 1] = -kInf;
      // A NaN (also one hidden among -inf, which x86's max drops), a +inf.
      std::vector<double> with_nan = base;
      with_nan[n / 3] = kNaN;
      std::vector<double> nan_in_inf(n, -kInf);
      nan_in_inf[n / 2] = kNaN;
      if (n > 1) nan_in_inf[n - 1] = 1.0;
      std::vector<double> with_pos_inf = base;
      with_pos_inf[n - 1] = kInf;
      for (const auto& row : {all_inf, half_inf, with_nan, nan_in_inf, with_pos_inf}) {
        for (DType dt : {DType::Float32, DType::Float64}) {
          const Tensor t = from_doubles(row, {1, n}, dt);
          check_op(t, row, -1, false);
          check_op(t, row, -1, true);
        }
      }
    }
  });
}

TEST(SoftmaxSpecialValues, LargeMagnitudesDoNotOverflow) {
  // Subtracting the max first: e^(3e38) would overflow, e^(x - max) does not.
  for (double scale : {1e4, 1e30, 3e38}) {
    std::vector<double> row = nn_test::uniform(1500, 4, -1, 1);
    for (double& v : row) v *= scale;
    row[700] = scale;
    const Tensor t = from_doubles(row, {1, 1500}, DType::Float32);
    const std::vector<double> values = to_doubles(t);
    check_op(t, values, -1, false);
    check_op(t, values, -1, true);
    if (scale >= 1e30) {
      const std::vector<double> y = to_doubles(softmax(t, -1));
      EXPECT_EQ(y[700], 1.0);  // every other term is e^(-huge) = 0
    }
  }
}

TEST(SoftmaxShapes, ScalarsAndEmpty) {
  const Tensor scalar = Tensor::empty({}, DType::Float32).fill_(Scalar(3.5));
  EXPECT_EQ(softmax(scalar, 0).dim(), 0);
  EXPECT_EQ(softmax(scalar, 0).item().to_double(), 1.0);
  EXPECT_EQ(softmax(scalar, -1).item().to_double(), 1.0);
  EXPECT_EQ(log_softmax(scalar, 0).item().to_double(), 0.0);
  for (const Shape& shape : {Shape{0, 5}, Shape{3, 0}, Shape{2, 0, 4}}) {
    const Tensor t = Tensor::empty(shape, DType::Float32);
    for (int64_t dim = 0; dim < t.dim(); ++dim) {
      EXPECT_EQ(softmax(t, dim).sizes(), shape);
      EXPECT_EQ(log_softmax(t, dim).sizes(), shape);
    }
  }
}

TEST(SoftmaxDtypeArgument, ConvertsFirst) {
  // bf16 input with dtype=float32: computed on the bf16 values, float32 result.
  const auto s = random_sample({4, 300}, DType::BFloat16, 13, -6, 6);
  const Tensor got = softmax(s.tensor, 1, DType::Float32);
  check_softmax(s.tensor, s.values, 1, false, DType::Float32, DType::Float32, got);
  // Integer input with a float dtype works (PyTorch converts first).
  const Tensor ints = from_doubles({1, 2, 3, 4}, {4}, DType::Int64);
  const Tensor lp = log_softmax(ints, 0, DType::Float64);
  check_softmax(ints, {1, 2, 3, 4}, 0, true, DType::Float64, DType::Float64, lp);
  // float32 to float16.
  const auto f = random_sample({2, 70}, DType::Float32, 14, -4, 4);
  const Tensor h = softmax(f.tensor, -1, DType::Float16);
  check_softmax(f.tensor, to_doubles(f.tensor.to(DType::Float16)), -1, false, DType::Float16, DType::Float16, h);
}

TEST(SoftmaxDriver, AnyThreadCountGivesTheSameResult) {
  // Pools of 3 and 4 threads split one long row into 3 and 4 pieces (16-aligned
  // bounds, ragged end), with -inf pieces; the result matches the reference either way.
  const int64_t n = 90001;
  std::vector<double> row = nn_test::uniform(n, 31, -15, 15);
  for (int64_t i = 0; i < 30000; ++i) row[i] = -kInf;
  const Tensor x = from_doubles(row, {1, n}, DType::Float32);
  for (int threads : {1, 3, 4}) {
    ThreadPool pool(threads);
    for (bool log : {false, true}) {
      Tensor y = Tensor::empty({1, n}, DType::Float32);
      cpu::softmax_cpu({DType::Float32, x.data_ptr(), y.data_ptr(), 1, n, 1, log}, pool);
      check_softmax(x, row, -1, log, DType::Float32, DType::Float32, y);
    }
  }
}

TEST(SoftmaxKernels, ExpWithinTwoUlp) {
  // softmax_reduce stores e^(x - R), R the reference it returns (the max, or a grid
  // point within ln2/32 of it): with rows whose first element is the max, y is the
  // vector exp of the float difference x - R.
  std::vector<float> offsets;
  for (float v = -86.0f; v < 0.0f; v += 0.00731f) offsets.push_back(v);
  for (float v : {-1e-30f, -1e-7f, -0.5f, -0.34657359f, -0.0216608f, -86.59f, -87.0f, -100.0f, -1e30f}) {
    offsets.push_back(v);
  }
  offsets.push_back(-std::numeric_limits<float>::infinity());
  for_each_target(cpu::softmax_simd_targets(), [&] {
    for (float top : {0.0f, 1000.3f, -31.7f, 40000.5f}) {
      SCOPED_TRACE("max " + std::to_string(top));
      std::vector<float> x{top};
      for (float o : offsets) x.push_back(top + o);
      const int64_t n = static_cast<int64_t>(x.size());
      std::vector<float> y(x.size());
      float block_max[cpu::kSoftmaxMaxBlocks];
      const cpu::SoftmaxStats st = cpu::softmax_reduce(x.data(), y.data(), n, cpu::kSoftmaxBlock, block_max);
      EXPECT_LE(std::fabs(st.max - top), 0.0217);  // ln2/32
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double arg = static_cast<double>(x[i] - static_cast<float>(st.max));
        if (arg < -86.6) {
          EXPECT_EQ(y[i], 0.0f) << "e^" << arg << " flushes to 0";
          continue;
        }
        const double want = std::exp(arg);
        const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
        worst = std::max(worst, std::fabs(y[i] - want) / ulp);
      }
      EXPECT_LE(worst, 2.0);
    }
  });
}

TEST(SoftmaxErrors, DtypesAndDims) {
  const Tensor ints = from_doubles({1, 2, 3}, {3}, DType::Int64);
  expect_error([&] { softmax(ints, 0); }, ErrorKind::Type,
               {"softmax:", "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'", "int64"});
  const Tensor ints2 = from_doubles({1, 2, 3, 4}, {2, 2}, DType::Int32);
  expect_error([&] { log_softmax(ints2, 0); }, ErrorKind::Type,
               {"log_softmax:", "\"log_softmax_kernel_impl\" not implemented for 'Int'"});
  const Tensor f = from_doubles({1, 2}, {2}, DType::Float32);
  expect_error([&] { softmax(f, 0, DType::Int64); }, ErrorKind::Type, {"'Long'", "dtype int64"});
  expect_error([&] { softmax(from_doubles({1}, {1}, DType::Bool), 0); }, ErrorKind::Type, {"'Bool'"});
  expect_error([&] { softmax(from_doubles({1}, {1}, DType::Complex64), 0); }, ErrorKind::Type, {"'ComplexFloat'"});
  expect_error([&] { softmax(from_doubles({1}, {1}, DType::Float8_e4m3fn), 0); }, ErrorKind::Type,
               {"'Float8_e4m3fn'"});
  expect_error([&] { softmax(f, 1); }, ErrorKind::Index, {"softmax"});
  expect_error([&] { log_softmax(f, -2); }, ErrorKind::Index, {"log_softmax"});
  expect_error([&] { softmax(Tensor(), 0); }, ErrorKind::Runtime, {"softmax", "undefined"});
}

}  // namespace
}  // namespace kiln
