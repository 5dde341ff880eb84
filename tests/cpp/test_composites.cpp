// Every fused op against its unfused composite (kiln/ops/composite.h): the same inputs
// through the fused kernel and through the chain of simpler ops that defines it, over
// edge sizes (0, 1, SIMD lane widths +/- 1), non-contiguous and broadcast inputs, and
// every dtype the op takes. The two evaluate the same formula with different summation
// orders and exp polynomials, so each comparison allows the error bound of both (each
// derived next to its check): the fused op's own bound against the exact value, as
// its scalar-reference tests derive it, plus the composite's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ops/attention.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/moe.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "kiln/type_promotion.h"
#include "linear_test_util.h"
#include "nn_test_utils.h"

namespace kiln {
namespace {

using nn_test::compute_roundoff;
using nn_test::expect_error;
using nn_test::near;
using nn_test::random_sample;
using nn_test::to_doubles;
using nn_test::underflow_error;
using nn_test::unit_roundoff;

constexpr DType kFloatDtypes[] = {DType::Float32, DType::BFloat16, DType::Float16, DType::Float64};
constexpr DType kActivationDtypes[] = {DType::Float32, DType::BFloat16, DType::Float16};

// Row lengths around the SIMD widths (4, 8 and 16 float32 lanes) and beyond.
const std::vector<int64_t> kLengths = {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100};

// Expects the fused and composite results to have one shape and dtype and every element
// to agree within tol(fused, composite, i); NaN matches NaN and infinities match exactly.
void expect_agree(const Tensor& fused, const Tensor& composite,
                  const std::function<double(double, double, size_t)>& tol) {
  ASSERT_EQ(fused.sizes(), composite.sizes());
  ASSERT_EQ(fused.dtype(), composite.dtype());
  const std::vector<double> f = to_doubles(fused), c = to_doubles(composite);
  int failures = 0;
  for (size_t i = 0; i < f.size() && failures < 5; ++i) {
    const auto ok = near(f[i], c[i], tol(f[i], c[i], i));
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "element " << i << " of " << f.size() << ": fused vs composite " << ok.message();
    }
  }
}

// Either value's magnitude: the bounds below are relative to the result.
double larger(double a, double b) { return std::max(std::fabs(a), std::fabs(b)); }

// The tolerances above allow a narrow rounding step to land one ulp apart, so they
// would also pass a composite that skipped or misplaced one. This pins the steps: with
// a tolerance at float32 precision (`tight_rel` relative) only elements whose value
// lies within that distance of a rounding boundary of the narrow dtype can differ --
// a fraction of about tight_rel / 2^-8 of them, well under 1% for the sizes used --
// while a missing or extra bfloat16 rounding changes about half of them.
void expect_rounding_steps_agree(const Tensor& fused, const Tensor& composite, double tight_rel) {
  ASSERT_EQ(fused.sizes(), composite.sizes());
  const std::vector<double> f = to_doubles(fused), c = to_doubles(composite);
  int64_t apart = 0;
  for (size_t i = 0; i < f.size(); ++i) apart += std::fabs(f[i] - c[i]) > tight_rel * larger(f[i], c[i]) + 1e-30;
  EXPECT_LE(apart, static_cast<int64_t>(f.size()) / 100) << "of " << f.size() << " elements";
}

// A tensor of `dtype` with uniform values in [lo, hi] (rounded to dtype).
Tensor uniform_tensor(const Shape& shape, DType dtype, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  return random_sample(shape, dtype, seed, lo, hi).tensor;
}

// ---------------------------------------------------------------------------------
// silu_and_mul

// Each side computes silu(g) * up in the compute dtype: the fused kernel within 7u of
// the exact value (exp 4u, 1 + e^-g, the division and the product: test_activation_
// fused.cpp), the composite within silu's 3 ulp (6u) plus the product (u). So the two
// differ by at most 14u relative; narrow dtypes then round each once, which can put
// them one output ulp (2 u_out) apart, or half a subnormal each where float16 underflows.
void check_silu_and_mul(const Tensor& x) {
  const Tensor fused = silu_and_mul(x);
  const double u = compute_roundoff(x.dtype()), u_out = unit_roundoff(x.dtype());
  expect_agree(fused, composite::silu_and_mul(x), [&](double f, double c, size_t) {
    return larger(f, c) * (14 * u + 2 * u_out) + 2 * underflow_error(x.dtype());
  });
}

TEST(CompositeSiluAndMul, SizesDtypesAndLayouts) {
  uint32_t seed = 1;
  for (DType dt : kFloatDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    for (int64_t half : kLengths) check_silu_and_mul(uniform_tensor({3, 2 * half}, dt, seed++, -8, 8));
    check_silu_and_mul(uniform_tensor({2, 3, 2 * 777}, dt, seed++, -8, 8));  // 3-D, several threads
    check_silu_and_mul(uniform_tensor({8}, dt, seed++));                     // 1-D
    check_silu_and_mul(uniform_tensor({8, 6}, dt, seed++).t());               // last dim strided
    check_silu_and_mul(uniform_tensor({1, 18}, dt, seed++).expand({4, 18}));  // broadcast rows
    check_silu_and_mul(Tensor::empty({0, 8}, dt));
    check_silu_and_mul(Tensor::empty({3, 0}, dt));
  }
}

TEST(CompositeSiluAndMul, OneRoundingToTheNarrowDtype) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    const Tensor x = uniform_tensor({8, 2 * 512}, dt, 30, -6, 6);
    expect_rounding_steps_agree(silu_and_mul(x), composite::silu_and_mul(x), 14 * compute_roundoff(dt));
  }
}

TEST(CompositeSiluAndMul, RefusesWhatTheFusedOpRefuses) {
  expect_error([] { composite::silu_and_mul(Tensor::empty({2, 5})); }, ErrorKind::Runtime, {"even size"});
  expect_error([] { composite::silu_and_mul(Tensor::empty({2, 4}, DType::Int32)); }, ErrorKind::Type, {"int32"});
}

// ---------------------------------------------------------------------------------
// RMSNorm variants and layer_norm

enum class Rms { Torch, Llama, OnePlus, Gated };

// Relative error bound between the fused and composite rsqrt(mean(x^2) + eps) over n
// values: the fused kernel's is 137u (test_norm.cpp: up to 256 sequential adds per
// lane on the scalar target, halved by the square root, plus the division); the
// composite's mean is a pairwise sum within (10 + log2 n) eps = (20 + 2 log2 n) u
// (reduce_test_utils.h), plus the squares, the division by n and the eps add (3u),
// halved by the square root, and rsqrt's 1 ulp (2u).
double rstd_rel(double u, int64_t n) {
  return 137 * u + ((20 + 2 * std::log2(static_cast<double>(std::max<int64_t>(n, 1))) + 3) / 2 + 2) * u;
}

// One variant on rows of `cols` values. Tolerances, on top of rstd_rel, with u the
// compute dtype's unit roundoff and each side's roundings counted:
//   Torch:   (x r) w, two products per side (4u); then the output rounding (2 u_out).
//   OnePlus: as Torch plus the sum 1 + w (rounded alike on both sides: 0).
//   Llama:   round_in(x r) may land one input ulp apart (2 u_in) on top of x r's own
//            difference (rstd_rel + 2u); then * w (2u) and the output rounding.
//   Gated:   as Llama, plus one ulp of the weighted dtype, the two sides' silu (7u
//            each: the fused mul_silu as silu_and_mul, the composite's 3 ulp plus its
//            product) and the output rounding.
// Subnormal float16 intermediates (|x r| < 6e-5) lose their relative accuracy: half a
// subnormal per rounding, times |w| <= 1.5 and |silu(g)| <= 6, bounds that (16x).
void check_rms(Rms variant, const Tensor& x, const Tensor& w, const Tensor& g, double eps) {
  const int64_t cols = x.size(-1);
  Tensor fused, comp;
  switch (variant) {
    case Rms::Torch:
      fused = rms_norm(x, {cols}, w, eps);
      comp = composite::rms_norm(x, {cols}, w, eps);
      break;
    case Rms::Llama:
      fused = rms_norm_llama(x, w, eps);
      comp = composite::rms_norm_llama(x, w, eps);
      break;
    case Rms::OnePlus:
      fused = rms_norm_one_plus(x, w, eps);
      comp = composite::rms_norm_one_plus(x, w, eps);
      break;
    case Rms::Gated:
      fused = rms_norm_gated(x, g, w, eps);
      comp = composite::rms_norm_gated(x, g, w, eps);
      break;
  }
  const bool wide = x.dtype() == DType::Float64 || w.dtype() == DType::Float64 ||
                    (variant == Rms::Gated && g.dtype() == DType::Float64);
  const double u = compute_roundoff(wide ? DType::Float64 : DType::Float32);
  const DType weighted = promote_types(x.dtype(), w.dtype());
  const double u_in = unit_roundoff(x.dtype()), u_out = unit_roundoff(fused.dtype());
  double rel = rstd_rel(u, cols) + 4 * u;
  if (variant == Rms::Llama || variant == Rms::Gated) rel += 2 * u_in + 2 * u;
  if (variant == Rms::Gated) rel += 2 * unit_roundoff(weighted) + 14 * u;
  const double floor = 16 * underflow_error(x.dtype()) + 2 * underflow_error(fused.dtype());
  expect_agree(fused, comp, [&](double f, double c, size_t) { return larger(f, c) * (rel + 2 * u_out) + floor; });
}

struct RmsDtypes {
  DType x, w, gate;
};

TEST(CompositeRmsNorm, EveryVariantDtypeAndLength) {
  const std::vector<RmsDtypes> dtypes = {
      {DType::Float32, DType::Float32, DType::Float32},   {DType::BFloat16, DType::BFloat16, DType::BFloat16},
      {DType::BFloat16, DType::Float32, DType::Float32},  {DType::Float16, DType::Float16, DType::Float16},
      {DType::Float16, DType::Float32, DType::BFloat16},  {DType::Float64, DType::Float64, DType::Float64},
      {DType::Float32, DType::Float64, DType::Float32},   {DType::Float32, DType::Float32, DType::Float64},
  };
  uint32_t seed = 100;
  for (Rms v : {Rms::Torch, Rms::Llama, Rms::OnePlus, Rms::Gated})
    for (const RmsDtypes& d : dtypes)
      for (int64_t cols : {1, 7, 8, 9, 15, 16, 17, 33, 1025}) {
        SCOPED_TRACE(testing::Message() << "variant " << static_cast<int>(v) << " x " << dtype_name(d.x) << " w "
                                        << dtype_name(d.w) << " gate " << dtype_name(d.gate) << " cols " << cols);
        check_rms(v, uniform_tensor({3, cols}, d.x, seed, -2, 2), uniform_tensor({cols}, d.w, seed + 1, -1.5, 1.5),
                  uniform_tensor({3, cols}, d.gate, seed + 2, -6, 6), 1e-6);
        seed += 3;
      }
}

// Each variant's bfloat16 rounding steps, pinned as described at
// expect_rounding_steps_agree: a float32 weight makes Llama's result float32, so only
// its intermediate round_in(x r) can tell; the others round once more at the end.
TEST(CompositeRmsNorm, RoundingStepsAgree) {
  const int64_t rows = 8, cols = 512;
  const Tensor x = uniform_tensor({rows, cols}, DType::BFloat16, 41, -2, 2);
  const Tensor w = uniform_tensor({cols}, DType::Float32, 42, -1.5, 1.5);
  const Tensor g = uniform_tensor({rows, cols}, DType::Float32, 43, -4, 4);
  const double tight = rstd_rel(compute_roundoff(DType::Float32), cols) + 30 * compute_roundoff(DType::Float32);
  expect_rounding_steps_agree(rms_norm_llama(x, w, 1e-6), composite::rms_norm_llama(x, w, 1e-6), tight);
  expect_rounding_steps_agree(rms_norm(x, {cols}, w, 1e-6), composite::rms_norm(x, {cols}, w, 1e-6), tight);
  expect_rounding_steps_agree(rms_norm_one_plus(x, w, 1e-6), composite::rms_norm_one_plus(x, w, 1e-6), tight);
  expect_rounding_steps_agree(rms_norm_gated(x, g, w, 1e-6), composite::rms_norm_gated(x, g, w, 1e-6), tight);
  const Tensor w16 = w.to(DType::BFloat16);  // the weighted product rounded to bfloat16 too
  expect_rounding_steps_agree(rms_norm_gated(x, g, w16, 1e-6), composite::rms_norm_gated(x, g, w16, 1e-6), tight);
}

TEST(CompositeRmsNorm, LayoutsEmptyAndThreads) {
  for (Rms v : {Rms::Torch, Rms::Llama, Rms::OnePlus, Rms::Gated}) {
    SCOPED_TRACE(static_cast<int>(v));
    const Tensor w = uniform_tensor({16}, DType::BFloat16, 1, -1.5, 1.5);
    // Rows strided (a transpose), rows broadcast from one (stride 0), no rows, 3-D rows.
    check_rms(v, uniform_tensor({16, 9}, DType::BFloat16, 2, -2, 2).t(), w,
              uniform_tensor({16, 9}, DType::BFloat16, 3, -6, 6).t(), 1e-5);
    check_rms(v, uniform_tensor({1, 16}, DType::Float32, 4, -2, 2).expand({5, 16}), w,
              uniform_tensor({1, 16}, DType::Float32, 5, -6, 6).expand({5, 16}), 1e-5);
    check_rms(v, Tensor::empty({0, 16}, DType::BFloat16), w, Tensor::empty({0, 16}, DType::BFloat16), 1e-6);
    check_rms(v, uniform_tensor({2, 40, 128}, DType::BFloat16, 6, -2, 2), uniform_tensor({128}, DType::Float32, 7),
              uniform_tensor({2, 40, 128}, DType::Float32, 8, -6, 6), 1e-6);
  }
  // Many rows over the pool, and one long row across many 1024-element sum blocks.
  check_rms(Rms::Torch, uniform_tensor({80, 2048}, DType::BFloat16, 9, -2, 2),
            uniform_tensor({2048}, DType::BFloat16, 10), Tensor(), 1e-6);
  check_rms(Rms::Llama, uniform_tensor({1, 100003}, DType::Float32, 11, -2, 2),
            uniform_tensor({100003}, DType::Float32, 12), Tensor(), 1e-5);
}

TEST(CompositeRmsNorm, TorchShapesAndDefaults) {
  // Two normalised dims, no weight, and eps = None (each dtype's own default).
  const Tensor x = uniform_tensor({3, 4, 5}, DType::Float32, 20, -2, 2);
  const Tensor w = uniform_tensor({4, 5}, DType::Float32, 21);
  const double rel = rstd_rel(compute_roundoff(DType::Float32), 20) + 4 * compute_roundoff(DType::Float32);
  expect_agree(rms_norm(x, {4, 5}, w, 1e-5), composite::rms_norm(x, {4, 5}, w, 1e-5),
               [&](double f, double c, size_t) { return larger(f, c) * rel; });
  for (DType dt : kFloatDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    // A row of tiny values, where eps dominates mean(x^2) and its default shows.
    const Tensor tiny = mul(uniform_tensor({2, 6}, dt, 22), Scalar(1e-4));
    const double u = compute_roundoff(dt);
    expect_agree(rms_norm(tiny, {6}), composite::rms_norm(tiny, {6}), [&](double f, double c, size_t) {
      return larger(f, c) * (rstd_rel(u, 6) + 4 * u + 2 * unit_roundoff(dt)) + 2 * underflow_error(dt);
    });
  }
  EXPECT_EQ(composite::rms_norm(Tensor::empty({3, 0}), {0}).sizes(), (Shape{3, 0}));
  expect_error([&] { composite::rms_norm(x, {4}); }, ErrorKind::Runtime, {"trailing dims"});
  expect_error([&] { composite::rms_norm_llama(x, w, 1e-6); }, ErrorKind::Runtime, {"weight of shape [5]"});
  expect_error([&] { composite::rms_norm_gated(x, x.view({5, 4, 3}), w.view({20}).narrow(0, 0, 5), 1e-6); },
               ErrorKind::Runtime, {"gate of the input's shape"});
}

// layer_norm: per row, with mean m, deviations d = x - m, rstd r, weight w and bias b
// (exact values from float64 arithmetic):
//   the mean: the fused two-pass kernel within 270u mean|x| (test_norm.cpp), the
//     composite's pairwise sum within (20 + 2 log2 n)u mean|x| plus the division (u);
//   r: the fused kernel within 137u, the composite as rstd_rel above;
//   (d r) w + b: three roundings per side (6u) relative to each partial, bounded by
//     |w| r |d| + |b|; then the output rounding (2 u_out |y|).
// An error e in the mean moves each y by |w| r e.
void check_layer_norm(const Tensor& x, const Shape& normalized, const std::optional<Tensor>& w,
                      const std::optional<Tensor>& b) {
  const Tensor fused = layer_norm(x, normalized, w, b, 1e-5);
  const Tensor comp = composite::layer_norm(x, normalized, w, b, 1e-5);
  const int64_t n = shape_numel(normalized);
  const DType dt = x.dtype();
  const double u = compute_roundoff(dt), u_out = unit_roundoff(dt);
  DimList dims;
  for (int64_t d = static_cast<int64_t>(normalized.size()); d >= 1; --d) dims.push_back(-d);
  const Tensor x64 = x.to(DType::Float64);
  const Tensor dev = sub(x64, mean(x64, dims, true));
  const Tensor rstd = rsqrt(add(mean(mul(dev, dev), dims, true), Scalar(1e-5)));
  const Tensor w_abs = w ? abs(w->to(DType::Float64)) : ones(normalized, DType::Float64);
  const Tensor b_abs = b ? abs(b->to(DType::Float64)) : zeros(normalized, DType::Float64);
  const double log_n = std::log2(static_cast<double>(std::max<int64_t>(n, 1)));
  const double mean_rel = 270 * u + (21 + 2 * log_n) * u;
  const double r_rel = rstd_rel(u, n) + 6 * u;
  // |w| r (mean_rel mean|x| + r_rel |d|) + 6u (|w| r |d| + |b|), as a tensor of x's shape.
  const Tensor scaled = mul(w_abs, rstd);
  const Tensor bound = add(mul(scaled, add(mul(mean(abs(x64), dims, true), Scalar(mean_rel)),
                                           mul(abs(dev), Scalar(r_rel + 6 * u)))),
                           mul(b_abs, Scalar(6 * u)));
  const std::vector<double> tol = to_doubles(bound.expand(x.sizes()));
  expect_agree(fused, comp, [&](double f, double c, size_t i) {
    return tol[i] + 2 * u_out * larger(f, c) + 2 * underflow_error(dt);
  });
}

TEST(CompositeLayerNorm, DtypesLengthsAndLayouts) {
  uint32_t seed = 200;
  for (DType dt : kFloatDtypes)
    for (int64_t cols : {1, 7, 8, 9, 16, 17, 1025}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " cols " << cols);
      const DType param = dt == DType::Float64 ? dt : DType::Float32;
      check_layer_norm(uniform_tensor({4, cols}, dt, seed, -3, 3), {cols}, uniform_tensor({cols}, param, seed + 1),
                       uniform_tensor({cols}, param, seed + 2));
      seed += 3;
    }
  check_layer_norm(uniform_tensor({3, 4, 6, 5}, DType::Float32, 1), {6, 5}, std::nullopt, std::nullopt);
  check_layer_norm(uniform_tensor({6, 10}, DType::BFloat16, 2, 997, 1003).t(), {6}, std::nullopt,
                   uniform_tensor({6}, DType::BFloat16, 3));  // strided rows, a large mean
  check_layer_norm(Tensor::empty({0, 4}), {4}, std::nullopt, std::nullopt);
}

// ---------------------------------------------------------------------------------
// linear_fp8

// Positive float32 scales of size 0.005 .. 0.015 / sqrt(K) (weights up to ~7 / sqrt(K):
// float16 results stay finite), per row or per 128x128 block.
Tensor random_scale(int64_t N, int64_t K, bool blocked, uint64_t seed) {
  const Shape shape = blocked ? Shape{(N + 127) / 128, (K + 127) / 128} : Shape{N};
  return mul(add(uniform_tensor(shape, DType::Float32, static_cast<uint32_t>(seed), 0, 1), Scalar(0.5)),
             Scalar(0.01 / std::sqrt(static_cast<double>(std::max<int64_t>(K, 1)))));
}

// Both sides accumulate sum_k x_k (w_k s) + b in float32: each within (K + 8) eps
// sum |x w s| + |b| of the exact value (linear_test_util.h, Higham's gamma_{K+c}), so
// they differ by twice that; the output rounding can put narrow results one ulp apart
// (2 u_out), and float16's subnormal spacing 2^-24 is the floor. x may be rounded to bf16
// first, the composite does not round it: one row on the GEMV kernel's bf16 dot path
// (linear_test::fp8_gemv_x_rounding), many rows on the bf16 dot tiles (kiln/cpu_features.h).
// Each x_k then moves by at most bf16's unit roundoff 2^-8 |x_k|, the fused side by 2^-8
// sum |x w s|.
void check_linear_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, const std::optional<Tensor>& bias) {
  const Tensor fused = linear_fp8(x, w, scale, bias);
  const Tensor comp = composite::linear_fp8(x, w, scale, bias);
  const int64_t K = w.size(1);
  const Tensor dense = dequantize_fp8(w, scale).to(DType::Float64);
  Tensor magnitude = matmul(abs(x.to(DType::Float64)), abs(dense).t());
  if (bias) magnitude = add(magnitude, abs(bias->to(DType::Float64)));
  const std::vector<double> mag = to_doubles(magnitude);
  const double u_out = linear_test::output_unit_roundoff(x.dtype());
  const int64_t rows = K > 0 ? x.numel() / K : 0;
  const double x_rounding = rows == 1 ? linear_test::fp8_gemv_x_rounding() : (rows > 1 && bf16_dot_enabled() ? 0x1p-8 : 0.0);
  expect_agree(fused, comp, [&](double f, double c, size_t i) {
    return 2 * linear_test::accumulation_tolerance(DType::Float32, K, mag[i]) + x_rounding * mag[i] +
           2 * u_out * larger(f, c) + (x.dtype() == DType::Float16 ? 0x1p-24 : 0.0);
  });
}

TEST(CompositeLinearFp8, SizesScalesAndDtypes) {
  uint64_t seed = 300;
  for (DType dt : kActivationDtypes)
    for (int64_t M : {1, 3})
      for (int64_t K : {1, 7, 8, 9, 16, 17, 127, 128, 129, 300})
        for (int64_t N : {1, 5, 129}) {
          const bool blocked = (K + N + M) % 2 == 0, with_bias = (K + N) % 3 == 0;
          SCOPED_TRACE(testing::Message() << dtype_name(dt) << " M=" << M << " N=" << N << " K=" << K
                                          << (blocked ? " block scales" : " row scales") << (with_bias ? " +bias" : ""));
          std::optional<Tensor> bias;
          if (with_bias) bias = linear_test::random_tensor({N}, dt, seed + 3);
          check_linear_fp8(linear_test::random_tensor({M, K}, dt, seed), linear_test::random_fp8({N, K}, seed + 1),
                           random_scale(N, K, blocked, seed + 2), bias);
          seed += 4;
        }
}

TEST(CompositeLinearFp8, LayoutsAndEmpty) {
  const Tensor w = linear_test::random_fp8({40, 160}, 1).narrow(1, 0, 150);  // rows strided in a wider matrix
  for (bool blocked : {false, true}) {
    const Tensor s = random_scale(40, 150, blocked, 2);
    check_linear_fp8(linear_test::random_tensor({150, 6}, DType::BFloat16, 3).t(), w, s, std::nullopt);  // x^T
    check_linear_fp8(linear_test::random_tensor({1, 150}, DType::Float32, 4).expand({5, 150}), w, s,
                     linear_test::random_tensor({40}, DType::Float32, 5));
    check_linear_fp8(linear_test::random_tensor({2, 3, 150}, DType::Float16, 6), w, s, std::nullopt);  // 3-D x
    check_linear_fp8(linear_test::random_tensor({150}, DType::BFloat16, 7), w, s, std::nullopt);        // 1-D x
    check_linear_fp8(Tensor::empty({0, 150}, DType::BFloat16), w, s, std::nullopt);                     // M = 0
  }
  // K = 0: the bias (or zeros).
  const Tensor w0 = linear_test::random_fp8({5, 0}, 8);
  check_linear_fp8(linear_test::random_tensor({2, 0}, DType::Float32, 9), w0, random_scale(5, 0, false, 10),
                   linear_test::random_tensor({5}, DType::Float32, 11));
  expect_error([&] { composite::linear_fp8(Tensor::empty({2, 150}), w, random_scale(41, 150, false, 12)); },
               ErrorKind::Runtime, {"per row"});
}

// ---------------------------------------------------------------------------------
// Attention

// Inputs are uniform in [-1, 1] (|v| <= 1, so |out| <= 1) and float masks within
// [-2, 2]. With u the compute dtype's unit roundoff, each side is within
// 2 B u + (2S + 8) u of the exact output (test_attention.cpp): a score q.k * scale is a
// length-E sum, within (E + 2) u E scale with the scaling of q, plus the mask's add
// (u (E scale + 2), so B = (E + 2) E scale + E scale + 2 covers both); each weight's
// relative error is twice the score's (the score and the max) plus the exp, the S-term
// sum and the division; the output, a convex combination of |v| <= 1, adds S u. Twice
// that for the two sides, twice again for the online softmax's rescaling (one rounding
// per key block), and one output ulp apart for narrow dtypes.
double attention_tolerance(DType dtype, int64_t S, int64_t E, double scale) {
  const double u = compute_roundoff(dtype);
  const double es = static_cast<double>(E) * scale;
  const double score = (static_cast<double>(E) + 2) * es + es + 2;
  return 4 * (2 * score + 2 * static_cast<double>(S) + 8) * u + 2 * unit_roundoff(dtype);
}

void check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask = std::nullopt,
                     bool causal = false, std::optional<double> scale = std::nullopt, bool gqa = false) {
  const Tensor fused = scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale, gqa);
  const Tensor comp = composite::scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale, gqa);
  const int64_t E = q.size(-1);
  const double tol =
      attention_tolerance(q.dtype(), k.size(-2), E, scale.value_or(1.0 / std::sqrt(static_cast<double>(E))));
  expect_agree(fused, comp, [&](double, double, size_t) { return tol; });
}

// The fused decode path: L == 1 without mask or dropout, GQA groups of 1 to 8 query
// heads per K/V head, head dims around the lane widths, contexts from 0 keys to several
// threads' worth, every dtype.
TEST(CompositeAttention, DecodeGqaSizesAndDtypes) {
  uint32_t seed = 400;
  for (DType dt : kFloatDtypes)
    for (int64_t group : {1, 3, 8})
      for (int64_t E : {1, 7, 8, 9, 16, 17, 80})
        for (int64_t S : {0, 1, 7, 8, 9, 100, 1000}) {
          if (dt != DType::Float32 && (E == 7 || E == 9 || S == 8)) continue;  // fewer shapes off float32
          SCOPED_TRACE(testing::Message() << dtype_name(dt) << " group=" << group << " E=" << E << " S=" << S);
          const Tensor q = uniform_tensor({2, 2 * group, 1, E}, dt, seed);
          // K/V stored [B, S, H, E] (a cache layout) and viewed as [B, H, S, E].
          const Tensor k = uniform_tensor({2, S, 2, E}, dt, seed + 1).transpose(1, 2);
          const Tensor v = uniform_tensor({2, S, 2, E}, dt, seed + 2).transpose(1, 2);
          check_attention(q, k, v, std::nullopt, false, std::nullopt, true);
          seed += 3;
        }
}

TEST(CompositeAttention, DecodeLayoutsScaleAndCausal) {
  const Tensor k = uniform_tensor({2, 4, 33, 40}, DType::Float32, 1), v = uniform_tensor({2, 4, 33, 24}, DType::Float32, 2);
  // q with a strided last dim, q broadcast over the batch, heads broadcast without GQA.
  check_attention(uniform_tensor({2, 4, 40, 3}, DType::Float32, 3).transpose(2, 3).narrow(2, 0, 1), k, v);
  check_attention(uniform_tensor({1, 4, 1, 40}, DType::Float32, 4).expand({2, 4, 1, 40}), k, v);
  check_attention(uniform_tensor({2, 4, 1, 40}, DType::Float32, 5), k.slice(1, 0, 1), v.slice(1, 0, 1));
  check_attention(uniform_tensor({2, 4, 1, 40}, DType::Float32, 6), k, v, std::nullopt, false, 0.7);
  // is_causal with L == 1 sees key 0 only.
  check_attention(uniform_tensor({2, 4, 1, 40}, DType::Float32, 7), k, v, std::nullopt, true);
  // Rank 2 and rank 3 operands.
  check_attention(uniform_tensor({1, 8}, DType::BFloat16, 8), uniform_tensor({6, 8}, DType::BFloat16, 9),
                  uniform_tensor({6, 3}, DType::BFloat16, 10));
  check_attention(uniform_tensor({3, 1, 8}, DType::Float16, 11), uniform_tensor({3, 6, 8}, DType::Float16, 12),
                  uniform_tensor({3, 6, 5}, DType::Float16, 13));
}

// The general kernel's features against the same definition: masks (with fully
// masked rows), causal, several query rows.
TEST(CompositeAttention, GeneralPathMasksAndCausal) {
  const int64_t L = 7, S = 33, E = 16;
  for (DType dt : kFloatDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor q = uniform_tensor({2, 3, L, E}, dt, 20), k = uniform_tensor({2, 3, S, E}, dt, 21),
                 v = uniform_tensor({2, 3, S, E}, dt, 22);
    std::vector<double> bits = nn_test::uniform(L * S, 23, 0, 1);
    for (double& b : bits) b = b < 0.35 ? 0 : 1;
    for (int64_t j = 0; j < S; ++j) bits[2 * S + j] = 0;  // query row 2 sees nothing
    check_attention(q, k, v, nn_test::from_doubles(bits, {L, S}, DType::Bool));
    check_attention(q, k, v, uniform_tensor({3, 1, S}, DType::Float32, 24, -2, 2));  // broadcast float mask
    check_attention(q, k, v, std::nullopt, true);
    check_attention(q, uniform_tensor({2, 1, S, E}, dt, 25), uniform_tensor({2, 1, S, E}, dt, 26), std::nullopt,
                    true, std::nullopt, true);
    check_attention(q.slice(2, 0, 0), k, v);  // L == 0
  }
}

TEST(CompositeAttention, AttentionDecodeEntryPoint) {
  for (DType dt : kFloatDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t B = 2, Hq = 8, Hkv = 2, S_max = 300, E = 40;
    const Tensor q = uniform_tensor({B, Hq, E}, dt, 30);
    const Tensor kc = uniform_tensor({B, S_max, Hkv, E}, dt, 31).transpose(1, 2);
    const Tensor vc = uniform_tensor({B, Hkv, S_max, 24}, dt, 32);
    for (int64_t valid : {0, 1, 7, 257, 300}) {
      SCOPED_TRACE(valid);
      const double tol = attention_tolerance(dt, valid, E, 1.0 / std::sqrt(static_cast<double>(E)));
      expect_agree(attention_decode(q, kc, vc, valid), composite::attention_decode(q, kc, vc, valid),
                   [&](double, double, size_t) { return tol; });
    }
  }
  const Tensor q = uniform_tensor({1, 2, 8}, DType::Float32, 33), kc = uniform_tensor({1, 1, 4, 8}, DType::Float32, 34);
  expect_error([&] { composite::attention_decode(q, kc, kc, 5); }, ErrorKind::Index, {"valid_len 5"});
  expect_error([&] { composite::scaled_dot_product_attention(q, kc, kc, std::nullopt, 0.5); }, ErrorKind::Value,
               {"dropout_p"});
}

// ---------------------------------------------------------------------------------
// moe_experts

SwigluWeights random_expert(int64_t H, int64_t I, DType wdtype, bool block_scales, bool strided, uint64_t seed) {
  const auto make = [&](int64_t rows, int64_t cols, std::optional<Tensor>& scale, uint64_t s) {
    const int64_t wide = strided ? cols + 3 : cols;  // rows strided in a wider matrix
    if (wdtype == DType::Float8_e4m3fn) {
      const Shape shape = block_scales ? Shape{(rows + 127) / 128, (cols + 127) / 128} : Shape{rows};
      scale = mul(add(uniform_tensor(shape, DType::Float32, static_cast<uint32_t>(s + 7), 0, 1), Scalar(0.5)),
                  Scalar(0.01 / std::sqrt(static_cast<double>(cols))));
      return linear_test::random_fp8({rows, wide}, s).narrow(1, 0, cols);
    }
    return mul(linear_test::random_tensor({rows, wide}, DType::Float32, s),
               Scalar(1.0 / std::sqrt(static_cast<double>(cols))))
        .to(wdtype)
        .narrow(1, 0, cols);
  };
  SwigluWeights w;
  w.gate = make(I, H, w.gate_scale, seed);
  w.up = make(I, H, w.up_scale, seed + 100);
  w.down = make(H, I, w.down_scale, seed + 200);
  return w;
}

Tensor dense64(const Tensor& w, const std::optional<Tensor>& scale) {
  return (w.dtype() == DType::Float8_e4m3fn ? dequantize_fp8(w, *scale) : w).to(DType::Float64);
}

// sum over the tokens' experts of |w| * the error magnitude of one expert's output, as
// test_moe.cpp derives it: the gate and up dot products' sums of |products| (ga, ua),
// carried through the SwiGLU (|silu'| <= 1.1) and the down projection's |weights|. The
// shared expert's gate sigmoid(x . g) is a length-H dot product too; its relative error
// is at most (H + 4) u sum|x g| (|d log sigmoid / dz| <= 1), so its term is scaled by
// 1 + sum|x g| to carry that under the same factor.
std::vector<double> moe_magnitude(const Tensor& x, const MoeRouting& r, const MoeExperts& experts,
                                  const std::optional<SharedExpert>& shared) {
  const Tensor x64 = x.to(DType::Float64), x_abs = abs(x64);
  const auto expert_magnitude = [&](const SwigluWeights& w) {
    const Tensor g = dense64(w.gate, w.gate_scale), up = dense64(w.up, w.up_scale);
    const Tensor gx = matmul(x64, g.t()), ux = matmul(x64, up.t());
    const Tensor ga = matmul(x_abs, abs(g).t()), ua = matmul(x_abs, abs(up).t());
    const Tensor s = silu(gx);
    const Tensor act = add(add(mul(mul(ga, abs(ux)), Scalar(1.1)), mul(abs(s), ua)), abs(mul(s, ux)));
    return matmul(act, abs(dense64(w.down, w.down_scale)).t());
  };
  const Tensor ids = r.ids.to(DType::Int64), w_abs = abs(r.weights.to(DType::Float64));
  Tensor mag = zeros(x.sizes(), DType::Float64);
  for (int64_t e = 0; e < static_cast<int64_t>(experts.experts.size()); ++e) {
    const Tensor coef = sum(where(eq(ids, Scalar(e)), w_abs, Scalar(0.0)), {1}, true);
    mag = add(mag, mul(coef, expert_magnitude(experts.experts[static_cast<size_t>(e)])));
  }
  if (shared) {
    const Tensor g = shared->gate_weight.to(DType::Float64).reshape({-1, 1});
    const Tensor gate = sigmoid(matmul(x64, g));
    const Tensor gate_err = add(matmul(x_abs, abs(g)), Scalar(1.0));
    mag = add(mag, mul(mul(gate, gate_err), expert_magnitude(shared->weights)));
  }
  return to_doubles(mag);
}

struct MoeCase {
  int64_t T, H, I, E, k;
  DType wdtype, xdtype;
  bool block_scales = false;
  bool shared = false;
  bool strided = false;
};

// Each side accumulates in float32 and rounds once: within 2 (H + I + 16) u of the
// magnitude above (test_moe.cpp: H gate/up terms, I down terms, the k-way and shared
// sums, with a factor 2), so the two differ by twice that, plus one output ulp
// (2 u_out) and float16's subnormal spacing, plus the bf16 rounding of x and the
// activations where the FP8 GEMV kernel rounds them: 1.01 * 2^-7 of the magnitude, as
// moe_test_util.h's bf16_dot_rounding derives it.
void check_moe(const MoeCase& c, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "T=" << c.T << " H=" << c.H << " I=" << c.I << " E=" << c.E << " k=" << c.k
                                  << " w=" << dtype_name(c.wdtype) << " x=" << dtype_name(c.xdtype)
                                  << " block=" << c.block_scales << " shared=" << c.shared
                                  << " strided=" << c.strided);
  MoeExperts experts;
  for (int64_t e = 0; e < c.E; ++e) {
    experts.experts.push_back(random_expert(c.H, c.I, c.wdtype, c.block_scales, c.strided, seed + 1000 * e));
  }
  std::optional<SharedExpert> shared;
  if (c.shared) {
    shared = SharedExpert{random_expert(c.H, c.I + 3, c.wdtype, c.block_scales, false, seed + 77),
                          linear_test::random_tensor({1, c.H}, DType::BFloat16, seed + 78)};
  }
  const Tensor x = c.strided ? linear_test::random_tensor({c.H, c.T}, c.xdtype, seed + 5).transpose(0, 1)
                             : linear_test::random_tensor({c.T, c.H}, c.xdtype, seed + 5);
  const MoeRouting r =
      moe_route(linear_test::random_tensor({c.T, c.E}, DType::Float32, seed + 6), c.k, MoeScoring::Softmax, true);
  const Tensor fused = moe_experts(x, r.weights, r.ids, experts, shared);
  const Tensor comp = composite::moe_experts(x, r.weights, r.ids, experts, shared);
  const std::vector<double> mag = moe_magnitude(x, r, experts, shared);
  const double terms = static_cast<double>(c.H + c.I + (c.shared ? 3 : 0) + 16);
  const double u_out = linear_test::output_unit_roundoff(c.xdtype);
  const double rounding =
      c.wdtype == DType::Float8_e4m3fn && cpu::fp8_kernels_round_x_to_bf16() ? 1.01 * 0x1p-7 : 0.0;
  expect_agree(fused, comp, [&](double f, double cv, size_t i) {
    return (4 * terms * 0x1p-24 + rounding) * mag[i] + 2 * u_out * larger(f, cv) +
           (c.xdtype == DType::Float16 ? 0x1p-24 : 0.0);
  });
}

TEST(CompositeMoeExperts, WideWeights) {
  uint64_t seed = 500;
  for (DType w : kActivationDtypes)
    for (DType x : kActivationDtypes) {
      check_moe({1, 64, 32, 8, 2, w, x}, seed++);                       // one decode token
      check_moe({3, 17, 5, 4, 3, w, x}, seed++);                        // tails everywhere
      check_moe({5, 9, 15, 3, 1, w, x, false, true}, seed++);           // shared expert
      check_moe({4, 16, 17, 3, 2, w, x, false, false, true}, seed++);   // strided weights, transposed x
    }
  check_moe({0, 8, 4, 2, 1, DType::BFloat16, DType::BFloat16}, seed++);  // no tokens
  check_moe({1, 1, 1, 1, 1, DType::Float32, DType::Float32}, seed++);
  check_moe({40, 96, 48, 16, 4, DType::BFloat16, DType::BFloat16, false, true}, seed++);  // threads, shared
}

TEST(CompositeMoeExperts, Fp8Weights) {
  uint64_t seed = 600;
  for (DType x : kActivationDtypes) {
    check_moe({2, 64, 40, 6, 2, DType::Float8_e4m3fn, x}, seed++);
    check_moe({3, 200, 130, 4, 2, DType::Float8_e4m3fn, x, true}, seed++);  // partial 128 blocks
  }
  check_moe({5, 130, 128, 5, 3, DType::Float8_e4m3fn, DType::BFloat16, true, true}, seed++);
  check_moe({2, 31, 9, 3, 2, DType::Float8_e4m3fn, DType::Float32, false, true, true}, seed++);
}

TEST(CompositeMoeExperts, FusedLayoutAndErrors) {
  // Hugging Face's fused [E, 2I, H] / [E, H, I] tensors, read through views.
  const int64_t E = 3, H = 40, I = 24;
  const MoeExperts experts = MoeExperts::from_fused(linear_test::random_tensor({E, 2 * I, H}, DType::BFloat16, 1),
                                                    linear_test::random_tensor({E, H, I}, DType::BFloat16, 2));
  const Tensor x = linear_test::random_tensor({4, H}, DType::BFloat16, 3);
  const MoeRouting r = moe_route(linear_test::random_tensor({4, E}, DType::Float32, 4), 2, MoeScoring::Sigmoid, false);
  const std::vector<double> mag = moe_magnitude(x, r, experts, std::nullopt);
  expect_agree(moe_experts(x, r.weights, r.ids, experts), composite::moe_experts(x, r.weights, r.ids, experts),
               [&](double f, double c, size_t i) {
                 return 4 * (H + I + 16) * 0x1p-24 * mag[i] + 2 * 0x1p-8 * larger(f, c);
               });
  const Tensor bad = mul(ones({4, 2}, DType::Int32), Scalar(3));
  expect_error([&] { composite::moe_experts(x, r.weights, bad, experts); }, ErrorKind::Index, {"expert ids"});
  expect_error([&] { composite::moe_experts(x, r.weights, r.ids, MoeExperts{}); }, ErrorKind::Runtime,
               {"no experts"});
}

}  // namespace
}  // namespace kiln
