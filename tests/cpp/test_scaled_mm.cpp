// scaled_mm (F.scaled_mm) and _scaled_mm (legacy) against dequantise-then-matmul in double
// precision: both recipes, e4m3fn/e5m2 (and mixed) operands, row- and column-major B,
// every output dtype, bias of each dtype, scale_result, zero-size dims, work big enough
// for several threads, and every validation error with its message.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/scaled_mm.h"
#include "test_util.h"

using namespace kiln;

namespace {

using kiln::testing::expect_error;

std::vector<double> values(const Tensor& t) {
  const Tensor d = t.to(DType::Float64).contiguous();
  const double* p = d.data<double>();
  return std::vector<double>(p, p + d.numel());
}

// fp8 values of moderate size (|x| mostly below 8), as fp8 rounding of 2 * randn.
Tensor fp8_matrix(int64_t rows, int64_t cols, DType dt, bool column_major, uint64_t seed) {
  Generator g(seed);
  const Shape shape = column_major ? Shape{cols, rows} : Shape{rows, cols};
  Tensor t = randn(shape, DType::Float64, &g);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] *= 2.0;
  t = t.to(dt);
  return column_major ? t.t() : t;
}

Tensor f32_tensor(const Shape& shape, const std::vector<float>& v) {
  Tensor t = empty(shape, DType::Float32);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

// Positive scales in [0.01, 0.05).
Tensor scales(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  Tensor t = rand(shape, DType::Float32, &g);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.01f + 0.04f * t.data<float>()[i];
  return t;
}

double eps_of(DType dt) {
  switch (dt) {
    case DType::BFloat16: return 0x1p-7;
    case DType::Float16: return 0x1p-10;
    case DType::Float8_e4m3fn: return 0x1p-3;
    case DType::Float8_e5m2: return 0x1p-2;
    default: return std::numeric_limits<float>::epsilon();
  }
}

// The spacing of the output dtype's subnormals: the absolute error of its rounding near 0
// is at most half of it (float32, bfloat16: negligible).
double subnormal_step(DType dt) {
  switch (dt) {
    case DType::Float8_e4m3fn: return 0x1p-9;
    case DType::Float8_e5m2: return 0x1p-16;
    case DType::Float16: return 0x1p-24;
    default: return 0.0;
  }
}

// Checks out = ((A * sa) @ (B * sb) + bias) * out_mult against a double reference.
//
// Tolerance: the f32 sum of K products (the fp8 values widen exactly) is within
// gamma_K * sum|a b| <= K eps_f32 / 2 * sum|a b| of the exact sum (Higham 3.1); the
// doubled K eps_f32 sum|a sa b sb| bound leaves margin for the scales being applied after
// the sum instead of before. The two scale multiplies, the bias add and the output
// multiplier add four more f32 roundings: 4 eps_f32 (|exact| + |bias|). The cast to the
// output dtype rounds once more: eps_out * |exact| covers its eps_out / 2 for normal
// results, and subnormal_step (twice the worst case) for subnormal ones.
void expect_scaled(const Tensor& out, const Tensor& a, const Tensor& b, const std::vector<double>& sa,
                   const std::vector<double>& sb, const Tensor* bias, double out_mult, const std::string& what) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  ASSERT_EQ(out.sizes(), (Shape{M, N})) << what;
  const std::vector<double> av = values(a), bv = values(b), ov = values(out);
  const std::vector<double> biasv = bias != nullptr ? values(*bias) : std::vector<double>(static_cast<size_t>(N), 0.0);
  const double eps32 = std::numeric_limits<float>::epsilon();
  const double eps_out = eps_of(out.dtype());
  int bad = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      const double s_row = sa.size() == 1 ? sa[0] : sa[static_cast<size_t>(i)];
      const double s_col = sb.size() == 1 ? sb[0] : sb[static_cast<size_t>(j)];
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < K; ++p) {
        const double prod = (av[i * K + p] * s_row) * (bv[p * N + j] * s_col);
        sum += prod;
        magnitude += std::abs(prod);
      }
      const double bj = biasv[static_cast<size_t>(j)];
      const double exact = (sum + bj) * out_mult;
      const double tol = (2.0 * static_cast<double>(K) * eps32 * magnitude + 4.0 * eps32 * (std::abs(sum) + std::abs(bj))) *
                             std::abs(out_mult) * 2.0 +
                         eps_out * std::abs(exact) + subnormal_step(out.dtype());
      const double got = ov[i * N + j];
      if (!(std::abs(got - exact) <= tol) && bad++ < 5) {
        ADD_FAILURE() << what << " at (" << i << ", " << j << "): got " << got << ", expected " << exact << " +- "
                      << tol;
      }
    }
  }
}

struct Size {
  int64_t M, K, N;
};
// 1, odd, SIMD-ish and multi-threaded sizes (300 x 257 x 130 is ~10 M multiply-adds).
const Size kSizes[] = {{1, 1, 1}, {7, 33, 9}, {16, 64, 17}, {300, 257, 130}};

}  // namespace

TEST(ScaledMm, TensorWiseEveryOutputDtypeAndLayout) {
  const DType outs[] = {DType::Float32, DType::BFloat16, DType::Float16, DType::Float8_e4m3fn};
  for (const Size& s : kSizes) {
    for (bool b_col : {false, true}) {
      const Tensor a = fp8_matrix(s.M, s.K, DType::Float8_e4m3fn, false, 1);
      const Tensor b = fp8_matrix(s.K, s.N, DType::Float8_e4m3fn, b_col, 2);
      const Tensor sa = f32_tensor({}, {0.125f}), sb = f32_tensor({1}, {0.0625f});
      for (DType out_dt : outs) {
        const Tensor out = scaled_mm(a, b, sa, ScalingType::TensorWise, sb, ScalingType::TensorWise, std::nullopt, out_dt);
        EXPECT_EQ(out.dtype(), out_dt);
        expect_scaled(out, a, b, {0.125}, {0.0625}, nullptr, 1.0,
                      std::string("tensorwise ") + std::string(dtype_name(out_dt)) + (b_col ? " B col-major" : " B row-major") +
                          " M=" + std::to_string(s.M));
      }
    }
  }
}

TEST(ScaledMm, RowWiseWithBiasOfEachDtype) {
  for (const Size& s : kSizes) {
    for (bool b_col : {false, true}) {
      const Tensor a = fp8_matrix(s.M, s.K, DType::Float8_e4m3fn, false, 3);
      const Tensor b = fp8_matrix(s.K, s.N, DType::Float8_e4m3fn, b_col, 4);
      const Tensor sa = scales({s.M, 1}, 5), sb = scales({1, s.N}, 6);
      const std::vector<double> sav = values(sa), sbv = values(sb);
      Generator g(7);
      const Tensor bias_f32 = randn({s.N}, DType::Float32, &g);
      for (DType bias_dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
        // [N] and [1, N] biases both broadcast over the rows.
        const Tensor bias = bias_dt == DType::Float16 ? bias_f32.to(bias_dt).view({1, s.N}) : bias_f32.to(bias_dt);
        for (DType out_dt : {DType::Float32, DType::BFloat16}) {
          const Tensor out = scaled_mm(a, b, sa, ScalingType::RowWise, sb, ScalingType::RowWise, bias, out_dt);
          expect_scaled(out, a, b, sav, sbv, &bias, 1.0,
                        std::string("rowwise bias ") + std::string(dtype_name(bias_dt)) + " out " + std::string(dtype_name(out_dt)) +
                            " M=" + std::to_string(s.M));
        }
      }
    }
  }
}

TEST(ScaledMm, NonContiguousOperands) {
  // A column-major (a transpose) and A / B sliced with a step: copied or read in place.
  const Tensor a_col = fp8_matrix(13, 40, DType::Float8_e4m3fn, true, 20);
  const Tensor a_step = fp8_matrix(13, 80, DType::Float8_e4m3fn, false, 21).slice(1, 0, 80, 2);
  const Tensor b_step = fp8_matrix(80, 9, DType::Float8_e4m3fn, false, 22).slice(0, 0, 80, 2);
  const Tensor sa = scales({13, 1}, 23), sb = scales({1, 9}, 24);
  for (const Tensor& a : {a_col, a_step}) {
    const Tensor out = scaled_mm(a, b_step, sa, ScalingType::RowWise, sb, ScalingType::RowWise, std::nullopt,
                                 DType::Float32);
    expect_scaled(out, a, b_step, values(sa), values(sb), nullptr, 1.0, "non-contiguous");
  }
}

TEST(ScaledMm, E5m2AndMixedOperands) {
  const Size s{9, 40, 11};
  for (DType da : {DType::Float8_e5m2, DType::Float8_e4m3fn}) {
    const Tensor a = fp8_matrix(s.M, s.K, da, false, 8);
    const Tensor b = fp8_matrix(s.K, s.N, DType::Float8_e5m2, true, 9);
    const Tensor sa = f32_tensor({1}, {0.5f}), sb = f32_tensor({1}, {0.25f});
    const Tensor out = scaled_mm(a, b, sa, ScalingType::TensorWise, sb, ScalingType::TensorWise);
    EXPECT_EQ(out.dtype(), DType::BFloat16);  // F.scaled_mm's default
    expect_scaled(out, a, b, {0.5}, {0.25}, nullptr, 1.0, std::string("a ") + std::string(dtype_name(da)) + " b e5m2");
  }
}

TEST(ScaledMm, LegacyInfersRecipeAndDefaultsToMat1Dtype) {
  const Size s{12, 48, 10};
  const Tensor a = fp8_matrix(s.M, s.K, DType::Float8_e4m3fn, false, 10);
  const Tensor b = fp8_matrix(s.K, s.N, DType::Float8_e4m3fn, true, 11);
  // Tensorwise, default output = mat1's dtype (e4m3fn). Small scales keep results < 448.
  const Tensor sa = f32_tensor({}, {0.05f}), sb = f32_tensor({}, {0.05f});
  const Tensor out = _scaled_mm(a, b, sa, sb);
  EXPECT_EQ(out.dtype(), DType::Float8_e4m3fn);
  expect_scaled(out, a, b, {0.05f}, {0.05f}, nullptr, 1.0, "legacy tensorwise e4m3fn out");
  // Rowwise inferred from [M, 1] and [1, N]; scale_result divides the fp8 result...
  const Tensor ra = scales({s.M, 1}, 12), rb = scales({1, s.N}, 13);
  const Tensor sr = f32_tensor({}, {0.5f});
  const Tensor out_fp8 = _scaled_mm(a, b, ra, rb, std::nullopt, sr, DType::Float8_e4m3fn);
  expect_scaled(out_fp8, a, b, values(ra), values(rb), nullptr, 2.0, "legacy rowwise scale_result e4m3fn");
  const Tensor out_e5 = _scaled_mm(a, b, ra, rb, std::nullopt, sr, DType::Float8_e5m2);
  expect_scaled(out_e5, a, b, values(ra), values(rb), nullptr, 2.0, "legacy rowwise scale_result e5m2");
  // ...and is ignored for a non-fp8 output.
  const Tensor out_f32 = _scaled_mm(a, b, ra, rb, std::nullopt, sr, DType::Float32);
  expect_scaled(out_f32, a, b, values(ra), values(rb), nullptr, 1.0, "legacy rowwise scale_result ignored");
  // Bias in the legacy form.
  Generator g(14);
  const Tensor bias = randn({s.N}, DType::BFloat16, &g);
  const Tensor out_bias = _scaled_mm(a, b, ra, rb, bias, std::nullopt, DType::Float16);
  expect_scaled(out_bias, a, b, values(ra), values(rb), &bias, 1.0, "legacy rowwise bias f16 out");
}

TEST(ScaledMm, Fp8OutputSaturatesAt448) {
  // kiln's e4m3fn cast saturates finite overflow (spec decision 1): 4 * 4 * 100 = 1600.
  const Tensor a = f32_tensor({1, 1}, {4.0f}).to(DType::Float8_e4m3fn);
  const Tensor b = f32_tensor({1, 2}, {4.0f, -4.0f}).to(DType::Float8_e4m3fn);
  const Tensor s = f32_tensor({}, {10.0f});
  const std::vector<double> v = values(_scaled_mm(a, b, s, s));
  EXPECT_EQ(v, (std::vector<double>{448.0, -448.0}));
}

TEST(ScaledMm, ZeroSizeDims) {
  const Tensor s1 = f32_tensor({}, {1.0f});
  const auto fp8 = [](Shape shape) { return zeros(shape, DType::Float32).to(DType::Float8_e4m3fn); };
  EXPECT_EQ(scaled_mm(fp8({0, 8}), fp8({8, 5}), s1, ScalingType::TensorWise, s1, ScalingType::TensorWise).sizes(),
            (Shape{0, 5}));
  EXPECT_EQ(scaled_mm(fp8({3, 8}), fp8({8, 0}), s1, ScalingType::TensorWise, s1, ScalingType::TensorWise).sizes(),
            (Shape{3, 0}));
  // K = 0: zeros, or the bias on every row. (PyTorch's CPU F.scaled_mm returns zeros and
  // drops the bias here, while its legacy _scaled_mm adds it; kiln adds it in both.)
  const Tensor k0 = scaled_mm(fp8({3, 0}), fp8({0, 4}), s1, ScalingType::TensorWise, s1, ScalingType::TensorWise,
                              std::nullopt, DType::Float32);
  for (double v : values(k0)) EXPECT_EQ(v, 0.0);
  const Tensor bias = f32_tensor({4}, {1.0f, -2.0f, 3.5f, 0.25f});
  const Tensor k0b = scaled_mm(fp8({3, 0}), fp8({0, 4}), scales({3, 1}, 1), ScalingType::RowWise, scales({1, 4}, 2),
                               ScalingType::RowWise, bias, DType::Float32);
  const std::vector<double> v = values(k0b);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(v[static_cast<size_t>(i * 4 + j)], values(bias)[static_cast<size_t>(j)]);
  }
  for (double x : values(_scaled_mm(fp8({2, 0}), fp8({0, 4}), s1, s1, bias, std::nullopt, DType::Float32))) {
    EXPECT_NE(x, 0.0);
  }
}

TEST(ScaledMm, ValidationErrors) {
  const auto fp8 = [](Shape shape) { return zeros(shape, DType::Float32).to(DType::Float8_e4m3fn); };
  const Tensor a = fp8({4, 8}), b = fp8({8, 6}), s1 = f32_tensor({}, {1.0f});
  const auto TW = ScalingType::TensorWise, RW = ScalingType::RowWise;
  const auto V = ErrorKind::Value, R = ErrorKind::Runtime;
  // F.scaled_mm (PyTorch raises ValueError here).
  expect_error([&] { scaled_mm(fp8({4}), b, s1, TW, s1, TW); }, V, "mat_a must be a matrix");
  expect_error([&] { scaled_mm(a, fp8({2, 8, 6}), s1, TW, s1, TW); }, V, "mat_b must be a matrix");
  expect_error([&] { scaled_mm(a, fp8({7, 6}), s1, TW, s1, TW); }, V,
               "mat_a and mat_b shapes cannot be multiplied (4x8 and 7x6)");
  expect_error([&] { scaled_mm(a, b, s1, TW, s1, TW, empty({5})); }, V, "Bias must be size 6 but got 5");
  expect_error([&] { scaled_mm(a, b, s1, TW, s1, TW, empty({6}, DType::Float64)); }, V,
               "Bias must be Float32 or BFloat16 or Half, but got float64");
  expect_error([&] { scaled_mm(a, b, s1, TW, s1, TW, empty({6, 1})); }, V, "bias must broadcast");
  expect_error([&] { scaled_mm(a, b, s1, ScalingType::BlockWise1x32, s1, TW); }, ErrorKind::NotImplemented,
               "BlockWise1x32 scaling recipe is not supported");
  expect_error([&] { scaled_mm(a, b, s1, TW, s1, ScalingType::BlockWise128x128); }, ErrorKind::NotImplemented,
               "BlockWise128x128");
  expect_error([&] { scaled_mm(a, b, s1, TW, scales({1, 6}, 1), RW); }, V, "Invalid scaling configuration");
  expect_error([&] { scaled_mm(a, b, scales({4, 1}, 1), RW, scales({6, 1}, 2), RW); }, V,
               "scale_a should be (4, 1) and scale_b should be (1, 6)");
  expect_error([&] { scaled_mm(a, b, s1.to(DType::Float64), TW, s1, TW); }, V, "scale_a.dtype()=float64");
  expect_error([&] { scaled_mm(a, b, f32_tensor({2}, {1, 1}), TW, s1, TW); }, V, "Invalid scaling configuration");
  // A [4, 1] scale_a viewed with a stride of 2 is not contiguous.
  expect_error([&] { scaled_mm(a, b, scales({8, 1}, 1).slice(0, 0, 8, 2), RW, scales({1, 6}, 2), RW); }, V,
               "Invalid scaling configuration");
  expect_error([&] { scaled_mm(empty({4, 8}, DType::BFloat16), b, s1, TW, s1, TW); }, V,
               "Got a.dtype()=bfloat16");
  expect_error([&] { scaled_mm(a, b, s1, TW, s1, TW, std::nullopt, DType::Float64); }, ErrorKind::Type,
               "output dtype must be float32, bfloat16, float16, float8_e4m3fn or float8_e5m2, but got float64");
  // _scaled_mm (RuntimeError, as PyTorch's TORCH_CHECK).
  expect_error([&] { _scaled_mm(fp8({4}), b, s1, s1); }, R, "mat_a must be a matrix");
  expect_error([&] { _scaled_mm(a, b, scales({4, 1}, 1), s1); }, R, "Invalid scaling configuration");
  expect_error([&] { _scaled_mm(a, fp8({7, 6}), s1, s1); }, R, "shapes cannot be multiplied (4x8 and 7x6)");
  expect_error([&] { _scaled_mm(a, b, s1, s1, std::nullopt, f32_tensor({2}, {1, 2})); }, R,
               "scale_result must be a float scalar");
  expect_error([&] { _scaled_mm(a, b, s1, s1, std::nullopt, s1.to(DType::BFloat16)); }, R,
               "scale_result must be a float scalar");
  expect_error([&] { _scaled_mm(a, b, s1, s1, empty({3})); }, R, "Bias must be size 6 but got 3");
  expect_error([&] { _scaled_mm(a, b, s1, s1, std::nullopt, std::nullopt, DType::Int32); }, ErrorKind::Type,
               "output dtype must be");
}
