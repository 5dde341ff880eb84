// The interpolate kernels (backend/interpolate.h) through their front ends: forward and
// backward against plain float64 scalar references written from PyTorch's index
// formulas (the forward as one weighted sum per output element, the backward as the
// scatter that defines the adjoint), every mode, 1-3 spatial dims, every float dtype,
// edge sizes; the gather's determinism across thread counts; channels-last layouts;
// gradcheck and gradgradcheck; and the kernel table's refusal of a device without
// kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd_test_util.h"
#include "backend/interpolate.h"
#include "kiln/context.h"
#include "kiln/ops/interpolate.h"
#include "kiln/ops/reduce.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace autograd_test;
using testing::expect_error;

// PyTorch's taps of one axis, in double (the float rounding of the scale as its CPU
// kernels do it: in float except the linear modes on float64).
struct RefTaps {
  std::vector<int64_t> i0, i1;
  std::vector<double> w0, w1;
};

RefTaps reference_taps(int64_t in, int64_t out, const std::string& mode, bool align, std::optional<double> factor,
                       bool f64) {
  const bool linear = mode != "nearest" && mode != "nearest-exact";
  double scale = align ? (out > 1 ? double(in - 1) / double(out - 1) : 0.0)
                       : (factor ? 1.0 / *factor : double(in) / double(out));
  if (!(linear && f64)) scale = static_cast<float>(scale);
  RefTaps t;
  for (int64_t j = 0; j < out; ++j) {
    if (!linear) {
      const double pos = mode == "nearest" ? static_cast<float>(j * scale) : static_cast<float>((j + 0.5) * scale);
      t.i0.push_back(std::min<int64_t>(static_cast<int64_t>(std::floor(pos)), in - 1));
      t.i1.push_back(t.i0.back());
      t.w0.push_back(1.0);
      t.w1.push_back(0.0);
      continue;
    }
    const double pos = align ? j * scale : std::max((j + 0.5) * scale - 0.5, 0.0);
    const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(pos)), in - 1);
    t.i0.push_back(i0);
    t.i1.push_back(std::min<int64_t>(i0 + 1, in - 1));
    t.w1.push_back(std::min(pos - double(i0), 1.0));
    t.w0.push_back(1.0 - t.w1.back());
  }
  return t;
}

struct Case {
  Shape input;  // [N, C, spatial...]
  Shape output_spatial;
  std::string mode;
  std::optional<bool> align;
};

std::vector<RefTaps> case_taps(const Case& c, bool f64) {
  std::vector<RefTaps> taps;
  for (size_t i = 0; i < c.output_spatial.size(); ++i) {
    taps.push_back(reference_taps(c.input[2 + i], c.output_spatial[i], c.mode, c.align.value_or(false), std::nullopt,
                                  f64));
  }
  return taps;
}

// Flat row-major offsets and per-output-element (source offset, weight) lists.
struct Stencil {
  std::vector<std::vector<std::pair<int64_t, double>>> sources;  // per output element
};

Stencil reference_stencil(const Case& c, bool f64) {
  const std::vector<RefTaps> taps = case_taps(c, f64);
  const size_t spatial = c.output_spatial.size();
  Shape out_sizes{c.input[0], c.input[1]};
  for (int64_t s : c.output_spatial) out_sizes.push_back(s);
  const int64_t out_numel = shape_numel(out_sizes);
  const Shape in_strides = contiguous_strides(c.input);
  Stencil st;
  st.sources.resize(out_numel);
  for (int64_t flat = 0; flat < out_numel; ++flat) {
    Shape idx(out_sizes.size());
    for (int64_t d = static_cast<int64_t>(out_sizes.size()) - 1, rest = flat; d >= 0; --d) {
      idx[d] = rest % out_sizes[d];
      rest /= out_sizes[d];
    }
    // Every combination of the two taps per axis.
    for (int combo = 0; combo < (1 << spatial); ++combo) {
      int64_t offset = idx[0] * in_strides[0] + idx[1] * in_strides[1];
      double w = 1.0;
      for (size_t a = 0; a < spatial; ++a) {
        const RefTaps& t = taps[a];
        const int64_t j = idx[2 + a];
        const bool second = (combo >> a) & 1;
        offset += (second ? t.i1[j] : t.i0[j]) * in_strides[2 + a];
        w *= second ? t.w1[j] : t.w0[j];
      }
      st.sources[flat].push_back({offset, w});
    }
  }
  return st;
}

std::vector<double> values_of(const Tensor& t) {
  const Tensor c = t.contiguous().to(DType::Float64);
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

// Rounding of one dtype: its unit roundoff (float64 results are compared at ~1e-12).
double unit_roundoff(DType dt) {
  switch (dt) {
    case DType::Float64: return 0x1p-53;
    case DType::Float32: return 0x1p-24;
    case DType::Float16: return 0x1p-11;
    default: return 0x1p-8;  // bfloat16
  }
}

Tensor sizes_vector_output(const Tensor& x, const Case& c) {
  return interpolate(x, c.output_spatial, {}, c.mode, c.align);
}

void check_case(const Case& c, DType dt) {
  SCOPED_TRACE(c.mode + " " + shape_to_string(c.input) + " -> " + shape_to_string(c.output_spatial) + " " +
               std::string(dtype_name(dt)));
  Generator gen(21);
  const Tensor x = randn(c.input, DType::Float64, &gen).to(dt);
  const Tensor y = sizes_vector_output(x, c);
  const Stencil st = reference_stencil(c, dt == DType::Float64);
  const std::vector<double> xv = values_of(x), yv = values_of(y);
  ASSERT_EQ(yv.size(), st.sources.size());
  // Forward: a convex combination of at most 8 inputs, rounded once to the dtype after
  // f32 arithmetic: |err| <= (8 * u_f32 + u_dtype) * max|x| (x is N(0, 1), |x| < 6).
  const double u = unit_roundoff(dt);
  const double fwd_tol = (8 * std::max(unit_roundoff(DType::Float32), dt == DType::Float64 ? 0x1p-50 : 0.0) + u) * 6;
  for (size_t o = 0; o < st.sources.size(); ++o) {
    double want = 0;
    for (auto [src, w] : st.sources[o]) want += w * xv[src];
    ASSERT_NEAR(yv[o], want, dt == DType::Float64 ? 1e-12 : fwd_tol) << "output " << o;
  }
  // Backward: the scatter that defines the adjoint, in float64.
  const Tensor g = randn(y.sizes(), DType::Float64, &gen).to(dt);
  const Tensor gx = interpolate_backward(g, c.input, c.output_spatial, {}, c.mode, c.align);
  ASSERT_EQ(gx.sizes(), c.input);
  const std::vector<double> gv = values_of(g), gxv = values_of(gx);
  std::vector<double> want(xv.size(), 0.0);
  std::vector<int64_t> terms(xv.size(), 0);
  for (size_t o = 0; o < st.sources.size(); ++o) {
    for (auto [src, w] : st.sources[o]) {
      want[src] += w * gv[o];
      ++terms[src];
    }
  }
  for (size_t i = 0; i < want.size(); ++i) {
    // A sum of `terms` products: |err| <= (terms + 1) * u_acc * sum|w g| + u_dtype * |sum|,
    // with sum|w g| <= terms * 6.
    const double acc_u = dt == DType::Float64 ? unit_roundoff(DType::Float64) : unit_roundoff(DType::Float32);
    const double tol = (terms[i] + 1) * acc_u * terms[i] * 6 * 4 + u * (std::abs(want[i]) + 1e-300) * 2 + 1e-12;
    ASSERT_NEAR(gxv[i], want[i], tol) << "input element " << i << " (" << terms[i] << " terms)";
  }
}

std::vector<Case> cases() {
  return {
      {{2, 3, 7}, {16}, "nearest", std::nullopt},
      {{2, 3, 16}, {7}, "nearest", std::nullopt},  // downsampling
      {{1, 2, 9}, {1}, "nearest-exact", std::nullopt},
      {{1, 2, 1}, {17}, "linear", false},
      {{2, 2, 8}, {15}, "linear", true},
      {{1, 2, 5}, {5}, "linear", false},
      {{2, 3, 4, 5}, {8, 10}, "nearest", std::nullopt},
      {{1, 2, 5, 8}, {3, 17}, "nearest-exact", std::nullopt},
      {{2, 2, 4, 5}, {7, 9}, "bilinear", false},
      {{1, 3, 6, 4}, {2, 16}, "bilinear", true},
      {{1, 1, 1, 1}, {1, 1}, "bilinear", true},
      {{1, 2, 3, 4, 5}, {6, 8, 10}, "nearest", std::nullopt},
      {{1, 2, 2, 3, 4}, {3, 5, 2}, "nearest-exact", std::nullopt},
      {{1, 2, 3, 2, 4}, {5, 4, 9}, "trilinear", false},
      {{2, 1, 2, 3, 3}, {4, 1, 5}, "trilinear", true},
  };
}

TEST(InterpolateKernels, ForwardAndBackwardMatchTheReference) {
  for (DType dt : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16}) {
    for (const Case& c : cases()) check_case(c, dt);
  }
}

TEST(InterpolateKernels, AdjointIdentity) {
  // <interpolate(x), g> == <x, interpolate_backward(g)> to float64 rounding.
  Generator gen(5);
  for (const Case& c : cases()) {
    const Tensor x = randn(c.input, DType::Float64, &gen);
    const Tensor y = sizes_vector_output(x, c);
    const Tensor g = randn(y.sizes(), DType::Float64, &gen);
    const double lhs = sum(mul(y, g)).item().to_double();
    const double rhs = sum(mul(x, interpolate_backward(g, c.input, c.output_spatial, {}, c.mode, c.align))).item()
                           .to_double();
    EXPECT_NEAR(lhs, rhs, 1e-9 * (1 + std::abs(lhs))) << c.mode << " " << shape_to_string(c.input);
  }
}

TEST(InterpolateKernels, BackwardIsTheSameForEveryThreadCount) {
  Generator gen(9);
  const Tensor g = randn({3, 5, 34, 38}, DType::Float32, &gen);
  Tensor one;
  {
    ThreadsScope scope(1);
    one = interpolate_backward(g, {3, 5, 17, 19}, {34, 38}, {}, "bilinear", false);
  }
  for (int threads : {2, 3, 4}) {
    ThreadsScope scope(threads);
    const Tensor many = interpolate_backward(g, {3, 5, 17, 19}, {34, 38}, {}, "bilinear", false);
    EXPECT_EQ(values_of(many), values_of(one)) << threads << " threads";
  }
}

TEST(InterpolateKernels, ChannelsLastInAndOut) {
  Generator gen(3);
  const Tensor x = randn({2, 5, 6, 7}, DType::Float32, &gen);
  const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
  for (const std::string mode : {"nearest", "bilinear"}) {
    const std::optional<bool> align = mode == "bilinear" ? std::optional<bool>(false) : std::nullopt;
    const Tensor y = interpolate(cl, {}, {2.0}, mode, align);
    EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast)) << mode;  // as in PyTorch
    EXPECT_EQ(values_of(y), values_of(interpolate(x, {}, {2.0}, mode, align))) << mode;
  }
  const Tensor x3 = randn({1, 3, 2, 3, 4}, DType::Float32, &gen);
  EXPECT_TRUE(interpolate(x3.contiguous(MemoryFormat::ChannelsLast3d), {}, {2.0}, "nearest")
                  .is_contiguous(MemoryFormat::ChannelsLast3d));
  // A strided (non-contiguous) input reads the same values as its contiguous copy.
  const Tensor strided = randn({2, 3, 6, 14}, DType::Float32, &gen).slice(3, 0, 14, 2);
  EXPECT_EQ(values_of(interpolate(strided, {}, {2.0}, "nearest")),
            values_of(interpolate(strided.contiguous(), {}, {2.0}, "nearest")));
}

TEST(InterpolateKernels, GradcheckAndDoubleBackward) {
  expect_gradcheck(one([](const Tensor& t) { return interpolate(t, {5}, {}, "linear", true); }),
                   {leaf({2, 2, 3}, 1)});
  expect_gradcheck(one([](const Tensor& t) { return interpolate(t, {3, 4, 5}, {}, "nearest-exact"); }),
                   {leaf({1, 2, 2, 3, 4}, 2)});
  expect_gradcheck(one([](const Tensor& t) { return interpolate(t, {}, {0.5}, "nearest"); }),
                   {leaf({1, 2, 6, 5}, 3)});
  expect_gradcheck(one([](const Tensor& t) { return interpolate(t, {}, {1.7}, "bilinear", false); }),
                   {transposed_leaf({1, 2, 3, 4}, 4)});
  expect_gradgradcheck(one([](const Tensor& t) { return interpolate(t, {4, 6}, {}, "bilinear", true); }),
                       {leaf({1, 1, 3, 4}, 5)});
  expect_gradcheck(one([](const Tensor& g) { return interpolate_backward(g, {1, 2, 3, 4}, {5, 7}, {}, "bilinear", false); }),
                   {leaf({1, 2, 5, 7}, 6)});
}

TEST(InterpolateKernels, BadInput) {
  expect_error([] { interpolate_backward(ones({1, 2, 8, 8}), {1, 2, 3, 4}, {}, {2.0}); }, ErrorKind::Runtime,
               "expected grad_output of size [1, 2, 6, 8]");
  expect_error([] { interpolate(ones({1, 2, 3, 4}, DType::Int64), {}, {2.0}); }, ErrorKind::Type,
               "floating-point");
  expect_error([] { interpolate(ones({1, 2, 3, 4}, DType::Complex64), {}, {2.0}); }, ErrorKind::Type,
               "floating-point");
  // A device without interpolate kernels is refused by the kernel table, by name.
  if (!backend::interpolate_kernels.has(DeviceType::CUDA)) {
    expect_error([] { backend::interpolate_kernels.on(Device{DeviceType::CUDA, 0}, "interpolate"); },
                 ErrorKind::NotImplemented, "interpolate: no kernel for device cuda");
  }
}

}  // namespace
}  // namespace kiln
