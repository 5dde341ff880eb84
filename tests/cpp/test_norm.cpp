// rms_norm (torch's, Llama, 1 + w, gated) and layer_norm against plain double-precision
// references that follow each variant's rounding steps, over row lengths around the
// SIMD widths and the 1024-element sum blocks, threaded row counts, multi-dim
// normalized shapes, non-contiguous inputs, every float dtype, and the error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "backend/cpu/nn/norm_kernels.h"
#include "kiln/ops/nn.h"
#include "kiln/type_promotion.h"
#include "nn_test_utils.h"

namespace kiln {
namespace {

using nn_test::compute_roundoff;
using nn_test::expect_error;
using nn_test::for_each_target;
using nn_test::from_doubles;
using nn_test::near;
using nn_test::random_sample;
using nn_test::round_to;
using nn_test::to_doubles;
using nn_test::underflow_error;
using nn_test::unit_roundoff;


double silu(double g) { return g / (1.0 + std::exp(-g)); }

// The relative error of the kernels' rsqrt(mean(x^2) + eps), u the compute dtype's unit
// roundoff: the sum of squares has each square rounded (u), at most 1024 / 4 = 256
// sequential adds per lane (the 1-lane scalar target) and ~10 to combine lanes (blocks
// add in double), so mean(x^2) is within 270u; the square root halves that; the
// division and the rounding to the compute dtype add 2u.
double rstd_rel(double u) { return 135 * u + 2 * u; }

enum class Variant { Torch, Llama, OnePlus, Gated };

struct NormCase {
  Variant variant;
  DType in_dtype;
  DType w_dtype;
  DType gate_dtype;
};

// Checks one variant on rows of `cols` values against the double reference.
//   Torch/OnePlus: y = round_out((x r) w'), w' = w or 1 + w, two products in the compute
//     dtype: error |y| (rstd_rel + 2u) plus the output's rounding.
//   Llama: y = round_out(round_in(x r) w): round_in(x r) may land one input ulp (2 u_in)
//     off the reference's, as r itself differs by rstd_rel.
//   Gated: n = round(w round_in(x r), promote(in, w)), y = round_in(n silu(g)): as Llama,
//     plus one ulp of the weighted dtype, the silu (within 2 ulp of its exp plus a
//     division: 6u) and the last product (u).
void check_rms_variant(const NormCase& c, const Shape& shape, uint32_t seed, double eps) {
  const int64_t cols = shape.back();
  const auto x = random_sample(shape, c.in_dtype, seed, -2, 2);
  const auto w = random_sample({cols}, c.w_dtype, seed + 1, -1.5, 1.5);
  const auto g = random_sample(shape, c.gate_dtype, seed + 2, -6, 6);
  Tensor got;
  DType out_dtype = c.in_dtype;
  switch (c.variant) {
    case Variant::Torch: got = rms_norm(x.tensor, {cols}, w.tensor, eps); break;
    case Variant::Llama:
      got = rms_norm_llama(x.tensor, w.tensor, eps);
      out_dtype = promote_types(c.in_dtype, c.w_dtype);
      break;
    case Variant::OnePlus: got = rms_norm_one_plus(x.tensor, w.tensor, eps); break;
    case Variant::Gated: got = rms_norm_gated(x.tensor, g.tensor, w.tensor, eps); break;
  }
  ASSERT_EQ(got.sizes(), shape);
  ASSERT_EQ(got.dtype(), out_dtype);
  const DType compute =
      c.in_dtype == DType::Float64 || c.w_dtype == DType::Float64 ||
              (c.variant == Variant::Gated && c.gate_dtype == DType::Float64)
          ? DType::Float64
          : DType::Float32;
  const double u = compute_roundoff(compute), u_in = unit_roundoff(c.in_dtype), u_out = unit_roundoff(out_dtype);
  const DType weighted = promote_types(c.in_dtype, c.w_dtype);
  // PyTorch hands eps to a float32 computation as a float.
  const double e = c.in_dtype == DType::Float64 ? eps : static_cast<double>(static_cast<float>(eps));
  const std::vector<double> y = to_doubles(got);
  const int64_t rows = x.tensor.numel() / cols;
  int failures = 0;
  for (int64_t r = 0; r < rows && failures < 5; ++r) {
    long double ss = 0;
    for (int64_t j = 0; j < cols; ++j) ss += static_cast<long double>(x.values[r * cols + j]) * x.values[r * cols + j];
    const double rstd = 1.0 / std::sqrt(static_cast<double>(ss / cols) + e);
    for (int64_t j = 0; j < cols && failures < 5; ++j) {
      const double xr = x.values[r * cols + j] * rstd, wj = w.values[j], gj = g.values[r * cols + j];
      double want = 0, rel = 0;
      switch (c.variant) {
        case Variant::Torch:
          want = xr * wj;
          rel = rstd_rel(u) + 2 * u;
          break;
        case Variant::OnePlus:
          want = xr * (1.0 + wj);
          rel = rstd_rel(u) + 3 * u;
          break;
        case Variant::Llama:
          want = round_to(xr, c.in_dtype) * wj;
          rel = rstd_rel(u) + 2 * u_in + 2 * u;
          break;
        case Variant::Gated:
          want = round_to(round_to(xr, c.in_dtype) * wj, weighted) * silu(gj);
          rel = rstd_rel(u) + 2 * u_in + 2 * unit_roundoff(weighted) + 8 * u;
          break;
      }
      const double mag = c.variant == Variant::Gated ? std::fabs(xr * wj * silu(gj)) : std::fabs(want);
      const double tol = mag * (rel + 2 * u_out) + underflow_error(out_dtype);
      const auto ok = near(y[r * cols + j], round_to(want, out_dtype), tol);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "row " << r << " col " << j << " of " << cols << ": " << ok.message();
      }
    }
  }
}

const std::vector<int64_t> kCols = {1, 3, 7, 8, 9, 15, 16, 17, 33, 64, 65, 1000, 1025, 2048, 4097};

TEST(NormRms, EveryVariantTargetAndLength) {
  for_each_target(cpu::norm_simd_targets(), [] {
    for (Variant v : {Variant::Torch, Variant::Llama, Variant::OnePlus, Variant::Gated}) {
      for (int64_t cols : kCols) {
        SCOPED_TRACE("variant " + std::to_string(static_cast<int>(v)) + " cols " + std::to_string(cols));
        check_rms_variant({v, DType::Float32, DType::Float32, DType::Float32}, {3, cols}, 7, 1e-6);
      }
    }
  });
}

TEST(NormRms, DtypeCombinations) {
  const std::vector<NormCase> cases = {
      {Variant::Torch, DType::BFloat16, DType::BFloat16, DType::Float32},
      {Variant::Torch, DType::Float16, DType::Float32, DType::Float32},
      {Variant::Torch, DType::Float64, DType::Float64, DType::Float32},
      {Variant::Torch, DType::Float32, DType::Float64, DType::Float32},
      {Variant::Llama, DType::BFloat16, DType::BFloat16, DType::Float32},
      {Variant::Llama, DType::BFloat16, DType::Float32, DType::Float32},  // float32 result, as HF
      {Variant::Llama, DType::Float16, DType::Float16, DType::Float32},
      {Variant::Llama, DType::Float64, DType::Float32, DType::Float32},
      {Variant::OnePlus, DType::BFloat16, DType::BFloat16, DType::Float32},
      {Variant::OnePlus, DType::Float16, DType::Float32, DType::Float32},
      {Variant::OnePlus, DType::Float64, DType::Float64, DType::Float32},
      {Variant::Gated, DType::BFloat16, DType::BFloat16, DType::BFloat16},
      {Variant::Gated, DType::BFloat16, DType::Float32, DType::BFloat16},
      {Variant::Gated, DType::Float16, DType::Float16, DType::Float32},
      {Variant::Gated, DType::Float64, DType::Float64, DType::Float64},
      {Variant::Gated, DType::Float32, DType::Float32, DType::Float64},
  };
  for (const NormCase& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.in_dtype)) + " x, " + std::string(dtype_name(c.w_dtype)) + " w, variant " +
                 std::to_string(static_cast<int>(c.variant)));
    for (int64_t cols : {5, 128, 1031}) check_rms_variant(c, {4, cols}, 17, 1e-6);
  }
}

TEST(NormRms, ManyRowsThreadedAndLongRows) {
  // 80 x 2048 is enough for several threads; one 100003-long row crosses many blocks.
  check_rms_variant({Variant::Torch, DType::BFloat16, DType::BFloat16, DType::Float32}, {80, 2048}, 3, 1e-6);
  check_rms_variant({Variant::Gated, DType::Float32, DType::Float32, DType::Float32}, {2, 40, 128}, 4, 1e-6);
  check_rms_variant({Variant::Llama, DType::Float32, DType::Float32, DType::Float32}, {1, 100003}, 5, 1e-5);
}

// The tolerances above allow a rounding step to land one ulp off (r differs slightly),
// which would also let a missing rounding step pass. Here the steps are pinned: with a
// tolerance of a small multiple of float32 precision -- below half a bfloat16 ulp --
// only elements whose x r lies within that distance of a bfloat16 rounding boundary
// may differ (a fraction of about rstd_rel / 2^-8 < 1%), while skipping or misplacing
// the bfloat16 rounding changes about half of them.
TEST(NormRms, RoundingStepsMatchHf) {
  const int64_t rows = 8, cols = 512;
  const auto x = random_sample({rows, cols}, DType::BFloat16, 41, -2, 2);
  const auto w = random_sample({cols}, DType::Float32, 42, -1.5, 1.5);
  const auto g = random_sample({rows, cols}, DType::Float32, 43, -4, 4);
  const std::vector<double> llama = to_doubles(rms_norm_llama(x.tensor, w.tensor, 1e-6));
  const std::vector<double> torch = to_doubles(rms_norm(x.tensor, {cols}, w.tensor, 1e-6));
  const std::vector<double> gated = to_doubles(rms_norm_gated(x.tensor, g.tensor, w.tensor, 1e-6));
  const double tight = 300 * std::ldexp(1.0, -24);
  int llama_off = 0, torch_off = 0, gated_off = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < cols; ++j) ss += x.values[r * cols + j] * x.values[r * cols + j];
    const double rstd = 1.0 / std::sqrt(ss / cols + static_cast<double>(1e-6f));
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t i = r * cols + j;
      const double xr = x.values[i] * rstd;
      const double want_llama = round_to(xr, DType::BFloat16) * w.values[j];  // float32 result
      llama_off += std::fabs(llama[i] - want_llama) > tight * std::fabs(want_llama);
      const double want_torch = round_to(xr * w.values[j], DType::BFloat16);
      torch_off += std::fabs(torch[i] - want_torch) > std::fabs(want_torch) * std::ldexp(1.0, -9);
      const double want_gated =
          round_to(round_to(xr, DType::BFloat16) * w.values[j] * silu(g.values[i]), DType::BFloat16);
      gated_off += std::fabs(gated[i] - want_gated) > std::fabs(want_gated) * std::ldexp(1.0, -9);
    }
  }
  const int limit = static_cast<int>(rows * cols / 100);
  EXPECT_LE(llama_off, limit);
  EXPECT_LE(torch_off, limit);
  EXPECT_LE(gated_off, limit);
}

TEST(NormRms, TorchNormalizedShapeAndDefaults) {
  // Two normalised dims: rows of 4 * 5 with a [4, 5] weight.
  const auto x = random_sample({3, 4, 5}, DType::Float32, 1);
  const auto w = random_sample({4, 5}, DType::Float32, 2);
  const std::vector<double> y = to_doubles(rms_norm(x.tensor, {4, 5}, w.tensor, 1e-5));
  for (int64_t r = 0; r < 3; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < 20; ++j) ss += x.values[r * 20 + j] * x.values[r * 20 + j];
    const double rstd = 1.0 / std::sqrt(ss / 20 + static_cast<double>(1e-5f));
    for (int64_t j = 0; j < 20; ++j) {
      const double want = x.values[r * 20 + j] * rstd * w.values[j];
      EXPECT_TRUE(near(y[r * 20 + j], want, std::fabs(want) * 200 * std::ldexp(1.0, -24)));
    }
  }
  // No weight, eps = None: float32 epsilon for float32 (and narrower) input, float64's
  // for float64 -- visible on a row of tiny values where eps dominates mean(x^2).
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float64}) {
    const Tensor tiny = from_doubles({1e-4, -1e-4, 1e-4, -1e-4}, {1, 4}, dt);
    const double v = to_doubles(tiny)[0];
    const double eps = dt == DType::Float64 ? std::ldexp(1.0, -52) : std::ldexp(1.0, -23);
    const double want = v / std::sqrt(v * v + eps);
    const double got = to_doubles(rms_norm(tiny, {4}))[0];
    EXPECT_TRUE(near(got, round_to(want, dt), std::fabs(want) * 4 * unit_roundoff(dt))) << dtype_name(dt);
  }
}

TEST(NormRms, NonContiguousAndEmpty) {
  const auto x = random_sample({16, 9}, DType::Float32, 3);
  const Tensor xt = x.tensor.t();  // [9, 16], rows strided
  const auto w = random_sample({16}, DType::Float32, 4);
  const std::vector<double> xv = to_doubles(xt);
  const std::vector<double> y = to_doubles(rms_norm_one_plus(xt, w.tensor, 1e-6));
  for (int64_t r = 0; r < 9; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < 16; ++j) ss += xv[r * 16 + j] * xv[r * 16 + j];
    const double rstd = 1.0 / std::sqrt(ss / 16 + static_cast<double>(1e-6f));
    for (int64_t j = 0; j < 16; ++j) {
      const double want = xv[r * 16 + j] * rstd * (1 + w.values[j]);
      EXPECT_TRUE(near(y[r * 16 + j], want, std::fabs(want) * 200 * std::ldexp(1.0, -24)));
    }
  }
  EXPECT_EQ(rms_norm(Tensor::empty({0, 8}), {8}).sizes(), (Shape{0, 8}));
  EXPECT_EQ(rms_norm_llama(Tensor::empty({0, 8}), Tensor::empty({8}), 1e-6).sizes(), (Shape{0, 8}));
  EXPECT_EQ(rms_norm(Tensor::empty({3, 0}), {0}).sizes(), (Shape{3, 0}));
}

// layer_norm's reference. Tolerance: the mean's sum has at most 270 roundings of
// size u * sum|x| (as the sum of squares above), so the mean is within 270u mean(|x|);
// the variance likewise within 270u var (the deviations from a mean off by d add n d^2,
// negligible); rstd within 137u; then (x - mean), * rstd, * w, + b round once each.
void check_layer_norm(const Shape& shape, const Shape& normalized, DType dt, DType param_dtype, bool affine,
                      uint32_t seed, double offset = 0.0) {
  const int64_t cols = shape_numel(normalized);
  auto x = random_sample(shape, dt, seed, -3 + offset, 3 + offset);
  const auto w = random_sample(normalized, param_dtype, seed + 1);
  const auto b = random_sample(normalized, param_dtype, seed + 2);
  const Tensor got = affine ? layer_norm(x.tensor, normalized, w.tensor, b.tensor, 1e-5)
                            : layer_norm(x.tensor, normalized, std::nullopt, std::nullopt, 1e-5);
  ASSERT_EQ(got.dtype(), dt);
  const std::vector<double> y = to_doubles(got);
  const double u = compute_roundoff(dt);
  const double e = dt == DType::Float64 ? 1e-5 : static_cast<double>(static_cast<float>(1e-5));
  const int64_t rows = x.tensor.numel() / cols;
  int failures = 0;
  for (int64_t r = 0; r < rows && failures < 5; ++r) {
    const double* xr = x.values.data() + r * cols;
    long double sum = 0, abs_sum = 0;
    for (int64_t j = 0; j < cols; ++j) {
      sum += xr[j];
      abs_sum += std::fabs(xr[j]);
    }
    const double mean = static_cast<double>(sum / cols);
    long double m2 = 0;
    for (int64_t j = 0; j < cols; ++j) m2 += (xr[j] - static_cast<long double>(mean)) * (xr[j] - mean);
    const double rstd = 1.0 / std::sqrt(static_cast<double>(m2 / cols) + e);
    const double mean_err = 270 * u * static_cast<double>(abs_sum / cols);
    for (int64_t j = 0; j < cols && failures < 5; ++j) {
      const double wj = affine ? w.values[j] : 1.0, bj = affine ? b.values[j] : 0.0;
      const double want = (xr[j] - mean) * rstd * wj + bj;
      const double tol = std::fabs(wj) * rstd * (mean_err + std::fabs(xr[j] - mean) * (137 * u + 3 * u)) +
                         u * (std::fabs(want) + std::fabs(bj)) + 2 * unit_roundoff(dt) * std::fabs(want) +
                         underflow_error(dt);
      const auto ok = near(y[r * cols + j], round_to(want, dt), tol);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "row " << r << " col " << j << ": " << ok.message();
      }
    }
  }
}

TEST(NormLayer, EveryTargetLengthAndDtype) {
  for_each_target(cpu::norm_simd_targets(), [] {
    for (int64_t cols : kCols) {
      SCOPED_TRACE("cols " + std::to_string(cols));
      check_layer_norm({5, cols}, {cols}, DType::Float32, DType::Float32, true, 3);
      check_layer_norm({5, cols}, {cols}, DType::Float64, DType::Float64, cols % 2 == 0, 4);
    }
  });
  check_layer_norm({6, 77}, {77}, DType::BFloat16, DType::BFloat16, true, 5);
  check_layer_norm({6, 77}, {77}, DType::BFloat16, DType::Float32, true, 6);  // mixed dtype
  check_layer_norm({6, 77}, {77}, DType::Float16, DType::Float32, false, 7);
  // A large mean against a small spread: the two-pass variance has no cancellation.
  check_layer_norm({4, 300}, {300}, DType::Float32, DType::Float32, true, 8, 1000.0);
  // Multi-dim normalized shape, threaded rows, one long row.
  check_layer_norm({3, 4, 6, 5}, {6, 5}, DType::Float32, DType::Float32, true, 9);
  check_layer_norm({96, 1024}, {1024}, DType::Float32, DType::Float32, true, 10);
  check_layer_norm({1, 100003}, {100003}, DType::Float32, DType::Float32, true, 11);
}

TEST(NormLayer, NonContiguousAndEmpty) {
  const auto x = random_sample({10, 6}, DType::Float32, 12);
  const Tensor xt = x.tensor.t().contiguous().t();  // [10, 6] with column-major strides
  const Tensor a = layer_norm(xt, {6});
  const Tensor b = layer_norm(x.tensor, {6});
  EXPECT_EQ(to_doubles(a), to_doubles(b));
  EXPECT_EQ(layer_norm(Tensor::empty({0, 4}), {4}).sizes(), (Shape{0, 4}));
}

TEST(NormErrors, ShapesDtypesAndWording) {
  const Tensor x = from_doubles(nn_test::uniform(12, 1), {3, 4}, DType::Float32);
  const Tensor w4 = from_doubles(nn_test::uniform(4, 2), {4}, DType::Float32);
  const Tensor w3 = from_doubles(nn_test::uniform(3, 2), {3}, DType::Float32);
  expect_error([&] { rms_norm(x, {}); }, ErrorKind::Runtime,
               {"rms_norm:", "Expected normalized_shape to be at least 1-dimensional"});
  expect_error([&] { layer_norm(x, {3}); }, ErrorKind::Runtime,
               {"layer_norm:",
                "Given normalized_shape=[3], expected input with shape [*, 3], but got input of size[3, 4]"});
  expect_error([&] { rms_norm(x, {4}, w3); }, ErrorKind::Runtime,
               {"Expected weight to be of same shape as normalized_shape, but got weight of shape [3]"});
  expect_error([&] { layer_norm(x, {4}, w4, w3); }, ErrorKind::Runtime, {"bias of shape [3]"});
  const Tensor ints = from_doubles({1, 2, 3, 4}, {1, 4}, DType::Int64);
  expect_error([&] { rms_norm(ints, {4}); }, ErrorKind::Type, {"\"rms_norm\" not implemented for 'Long'"});
  expect_error([&] { layer_norm(ints, {4}); }, ErrorKind::Type, {"\"LayerNormKernelImpl\" not implemented for 'Long'"});
  expect_error([&] { rms_norm_llama(ints, w4, 1e-6); }, ErrorKind::Type, {"rms_norm_llama:", "'Long'"});
  expect_error([&] { rms_norm(x, {4}, w4.to(DType::Int32)); }, ErrorKind::Type, {"weight", "int32"});
  expect_error([&] { layer_norm(x, {4}, w4.to(DType::Float64)); }, ErrorKind::Type,
               {"expected weight of dtype float32", "float64"});
  expect_error([&] { layer_norm(x.to(DType::Float64), {4}, std::nullopt, w4); }, ErrorKind::Type,
               {"bias of dtype float64"});
  expect_error([&] { rms_norm_llama(x, w3, 1e-6); }, ErrorKind::Runtime, {"expected weight of shape [4]"});
  expect_error([&] { rms_norm_one_plus(x, w4.view({1, 4}), 1e-6); }, ErrorKind::Runtime,
               {"rms_norm_one_plus:", "weight of shape [1, 4]"});
  expect_error([&] { rms_norm_gated(x, x.view({4, 3}), w4, 1e-6); }, ErrorKind::Runtime,
               {"rms_norm_gated:", "gate of shape [4, 3]"});
  expect_error([&] { rms_norm_gated(x, x.to(DType::Int8), w4, 1e-6); }, ErrorKind::Type, {"gate", "int8"});
  expect_error([&] { rms_norm_llama(from_doubles({1}, {}, DType::Float32), w4, 1e-6); }, ErrorKind::Runtime,
               {"0-dim"});
  expect_error([&] { rms_norm(Tensor(), {4}); }, ErrorKind::Runtime, {"undefined"});
}

}  // namespace
}  // namespace kiln
