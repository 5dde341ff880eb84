// conv1d/2d/3d and their backward (convolution_backward: input, weight and bias
// gradients) against the scalar references of conv_test_reference.h, for many shapes,
// every float dtype and the contiguous, channels-last and strided layouts.
#include <gtest/gtest.h>

#include <string>

#include "conv_test_reference.h"
#include "kiln/context.h"
#include "kiln/ops/conv.h"

namespace kiln {
namespace {

using conv_test::Case;
using conv_test::Layout;
using nn_test::from_doubles;
using nn_test::to_doubles;

Shape full(int64_t lead0, int64_t lead1, const Shape& spatial) {
  Shape s{lead0, lead1};
  s.insert(s.end(), spatial.begin(), spatial.end());
  return s;
}

Shape weight_shape(const Case& c) { return full(c.O, c.C / c.groups, c.kernel); }

Tensor conv_nd(const Case& c, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
  switch (c.in.size()) {
    case 1: return conv1d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    case 2: return conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    default: return conv3d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
  }
}

std::string describe(const Case& c, DType dtype, Layout layout) {
  std::string s = "N" + std::to_string(c.N) + " C" + std::to_string(c.C) + " O" + std::to_string(c.O) + " g" +
                  std::to_string(c.groups) + " in";
  for (int64_t v : c.in) s += " " + std::to_string(v);
  s += " k";
  for (int64_t v : c.kernel) s += " " + std::to_string(v);
  return s + " " + std::string(dtype_name(dtype)) + " layout " + std::to_string(static_cast<int>(layout));
}

// Forward and all three gradients of one case against the references.
void check_case(const Case& c, DType dtype, Layout layout, bool with_bias, uint32_t seed) {
  SCOPED_TRACE(describe(c, dtype, layout));
  const Shape out = conv_test::conv_out(c);
  const nn_test::Sample x = nn_test::random_sample(full(c.N, c.C, c.in), dtype, seed);
  const nn_test::Sample w = nn_test::random_sample(weight_shape(c), dtype, seed + 1);
  const nn_test::Sample b = nn_test::random_sample({c.O}, dtype, seed + 2);
  const nn_test::Sample gy = nn_test::random_sample(full(c.N, c.O, out), dtype, seed + 3);
  const Tensor xt = conv_test::with_layout(x.tensor, layout);
  const Tensor gyt = conv_test::with_layout(gy.tensor, layout);
  const std::optional<Tensor> bias = with_bias ? std::optional<Tensor>(b.tensor) : std::nullopt;
  const int64_t taps = conv_test::spatial_numel(c.kernel), P = conv_test::spatial_numel(out);

  const Tensor y = conv_nd(c, xt, w.tensor, bias);
  ASSERT_EQ(y.sizes(), full(c.N, c.O, out));
  EXPECT_EQ(y.dtype(), dtype);
  if (layout == Layout::ChannelsLast && y.numel() > 0) EXPECT_TRUE(conv_test::has_channels_last_strides(y));
  conv_test::expect_near_ref(y, conv_test::conv_ref(c, x.values, w.values, with_bias ? &b.values : nullptr), dtype,
                             (c.C / c.groups) * taps, "forward");

  auto [gx, gw, gb] = convolution_backward(gyt, xt, w.tensor, c.stride, c.padding, c.dilation, false, {0}, c.groups);
  ASSERT_EQ(gx.sizes(), xt.sizes());
  ASSERT_EQ(gw.sizes(), w.tensor.sizes());
  if (layout == Layout::ChannelsLast && gx.numel() > 0) EXPECT_TRUE(conv_test::has_channels_last_strides(gx));
  // conv's input gradient is conv_transpose(gy, w) with the output_padding that restores the input size.
  Case t{c.N, c.O, c.C, c.groups, out, c.kernel, c.stride, c.padding, c.dilation, {}};
  for (size_t i = 0; i < c.in.size(); ++i)
    t.output_padding.push_back(c.in[i] - ((out[i] - 1) * c.stride[i] - 2 * c.padding[i] +
                                          c.dilation[i] * (c.kernel[i] - 1) + 1));
  conv_test::expect_near_ref(gx, conv_test::conv_transpose_ref(t, gy.values, w.values, nullptr), dtype,
                             (c.O / c.groups) * taps, "grad_input");
  conv_test::expect_near_ref(gw, conv_test::weight_grad_ref(c, c.in, out, x.values, gy.values), dtype, c.N * P,
                             "grad_weight");
  conv_test::expect_near_ref(gb, conv_test::bias_grad_ref(c.N, c.O, P, gy.values), dtype, c.N * P, "grad_bias");
}

// Shapes: kernel 1, stride > kernel, dilation, groups and depthwise, padding, batch 0
// and 1, odd sizes around SIMD widths, and enough positions for several tiles.
std::vector<Case> cases_2d() {
  return {
      {2, 4, 6, 1, {7, 6}, {3, 2}, {2, 1}, {1, 2}, {1, 2}},
      {1, 3, 5, 1, {9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {2, 8, 8, 1, {17, 15}, {1, 1}, {1, 1}, {0, 0}, {1, 1}},   // 1x1: read in place
      {1, 5, 4, 1, {16, 9}, {1, 1}, {3, 2}, {0, 0}, {1, 1}},    // stride > kernel
      {2, 6, 4, 1, {11, 10}, {2, 2}, {3, 3}, {1, 0}, {1, 1}},   // stride > kernel, gaps
      {1, 6, 9, 3, {8, 7}, {3, 3}, {2, 2}, {2, 1}, {2, 1}},     // groups, dilation
      {2, 8, 8, 8, {9, 17}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},    // depthwise
      {1, 4, 8, 4, {7, 8}, {2, 3}, {2, 1}, {0, 1}, {1, 2}},     // depthwise x2
      {0, 3, 4, 1, {6, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},     // empty batch
      {2, 16, 7, 1, {40, 33}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},  // several tiles
      {1, 33, 17, 1, {20, 20}, {5, 5}, {1, 1}, {2, 2}, {1, 1}}, // long reduction
      {1, 2, 3, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}},
      {1, 2, 3, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},     // padding only
  };
}

TEST(Conv, Conv2dEveryDtypeAndLayout) {
  uint32_t seed = 10;
  for (const Case& c : cases_2d())
    for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16})
      for (Layout layout : {Layout::Contiguous, Layout::ChannelsLast, Layout::Strided}) {
        check_case(c, dtype, layout, (seed % 2) == 0, seed);
        seed += 7;
      }
}

TEST(Conv, Conv1dShapes) {
  const std::vector<Case> cases = {
      {2, 8, 8, 8, {17}, {4}, {1}, {3}, {1}},   // the hybrid models' causal depthwise conv
      {3, 7, 14, 7, {33}, {4}, {2}, {3}, {2}},  // depthwise x2, strided, dilated
      {2, 3, 5, 1, {9}, {3}, {1}, {1}, {1}},
      {1, 4, 6, 2, {15}, {2}, {3}, {0}, {3}},
      {2, 16, 8, 1, {65}, {1}, {1}, {0}, {1}},
      {1, 5, 3, 1, {8}, {1}, {4}, {2}, {1}},
      {0, 4, 4, 4, {8}, {3}, {1}, {1}, {1}},
  };
  uint32_t seed = 100;
  for (const Case& c : cases)
    for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16})
      for (Layout layout : {Layout::Contiguous, Layout::Strided}) {
        check_case(c, dtype, layout, (seed % 2) == 1, seed);
        seed += 5;
      }
}

TEST(Conv, Conv3dShapes) {
  const std::vector<Case> cases = {
      {2, 3, 4, 1, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}},
      {1, 4, 4, 4, {4, 5, 9}, {2, 3, 3}, {2, 1, 1}, {1, 1, 1}, {1, 1, 1}},  // depthwise
      {1, 6, 4, 2, {3, 4, 5}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}},
      {2, 2, 3, 1, {6, 5, 4}, {2, 2, 2}, {3, 2, 3}, {0, 1, 0}, {1, 1, 1}},
  };
  uint32_t seed = 300;
  for (const Case& c : cases)
    for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16})
      for (Layout layout : {Layout::Contiguous, Layout::ChannelsLast, Layout::Strided}) {
        check_case(c, dtype, layout, true, seed);
        seed += 3;
      }
}

// A channels-last weight alone makes the output channels-last (PyTorch's rule).
TEST(Conv, ChannelsLastWeightGivesChannelsLastOutput) {
  const nn_test::Sample x = nn_test::random_sample({2, 4, 6, 5}, DType::Float32, 1);
  const nn_test::Sample w = nn_test::random_sample({3, 4, 3, 3}, DType::Float32, 2);
  const Tensor y = conv2d(x.tensor, conv_test::with_layout(w.tensor, Layout::ChannelsLast));
  EXPECT_TRUE(conv_test::has_channels_last_strides(y));
  const Tensor y_ref = conv2d(x.tensor, w.tensor);
  EXPECT_TRUE(y_ref.is_contiguous());
  const std::vector<double> a = to_doubles(y), b = to_doubles(y_ref);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
}

// Same thread count, same bits; another thread count only reorders the weight
// gradient's final sum.
TEST(Conv, DeterministicAcrossRunsAndThreads) {
  const Case c{3, 8, 8, 1, {24, 20}, {3, 3}, {1, 1}, {1, 1}, {1, 1}};
  const nn_test::Sample x = nn_test::random_sample({3, 8, 24, 20}, DType::Float32, 5);
  const nn_test::Sample w = nn_test::random_sample({8, 8, 3, 3}, DType::Float32, 6);
  const nn_test::Sample gy = nn_test::random_sample({3, 8, 24, 20}, DType::Float32, 7);
  for (Layout layout : {Layout::Contiguous, Layout::ChannelsLast}) {
    const Tensor xt = conv_test::with_layout(x.tensor, layout), gyt = conv_test::with_layout(gy.tensor, layout);
    std::vector<std::vector<double>> runs;
    for (int threads : {1, 3, 3}) {
      ThreadsScope scope(threads);
      auto [gx, gw, gb] = convolution_backward(gyt, xt, w.tensor, c.stride, c.padding, c.dilation, false, {0}, 1);
      runs.push_back(to_doubles(conv2d(xt, w.tensor, std::nullopt, {1}, {1})));
      runs.push_back(to_doubles(gx));
      runs.push_back(to_doubles(gw));
    }
    // [forward, grad_input, grad_weight] per run: 1 thread, 3 threads, 3 threads again.
    EXPECT_EQ(runs[0], runs[3]) << "forward, 1 vs 3 threads";
    EXPECT_EQ(runs[1], runs[4]) << "grad_input, 1 vs 3 threads";
    for (size_t i = 0; i < runs[2].size(); ++i) EXPECT_NEAR(runs[2][i], runs[5][i], 1e-3) << "grad_weight " << i;
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(runs[3 + i], runs[6 + i]) << "3 threads twice, output " << i;
  }
}

TEST(Conv, PaddingModes) {
  const nn_test::Sample x = nn_test::random_sample({2, 3, 9, 8}, DType::Float64, 11);
  const nn_test::Sample w = nn_test::random_sample({4, 3, 4, 3}, DType::Float64, 12);
  // 'valid' is padding 0.
  EXPECT_EQ(to_doubles(conv2d(x.tensor, w.tensor, std::nullopt, {1}, "valid")), to_doubles(conv2d(x.tensor, w.tensor)));
  // 'same' with an even kernel (and dilation 3 on the odd one): total d (k - 1) per dim,
  // left = total / 2, the extra zero on the right.
  for (const Shape& dil : {Shape{1, 1}, Shape{1, 3}, Shape{2, 2}}) {
    const Tensor y = conv2d(x.tensor, w.tensor, std::nullopt, {1}, "same", dil);
    ASSERT_EQ(y.sizes(), (Shape{2, 4, 9, 8}));
    const int64_t th = dil[0] * 3, tw = dil[1] * 2;
    Case c{2, 3, 4, 1, {9 + th, 8 + tw}, {4, 3}, {1, 1}, {0, 0}, dil};
    // The reference on the explicitly padded input.
    std::vector<double> padded(static_cast<size_t>(2 * 3 * (9 + th) * (8 + tw)), 0.0);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t i = 0; i < 9; ++i)
          for (int64_t j = 0; j < 8; ++j)
            padded[static_cast<size_t>(((n * 3 + ch) * (9 + th) + i + th / 2) * (8 + tw) + j + tw / 2)] =
                x.values[static_cast<size_t>(((n * 3 + ch) * 9 + i) * 8 + j)];
    conv_test::expect_near_ref(y, conv_test::conv_ref(c, padded, w.values, nullptr), DType::Float64, 36, "same");
  }
  const nn_test::Sample x1 = nn_test::random_sample({1, 2, 10}, DType::Float64, 13);
  const nn_test::Sample w1 = nn_test::random_sample({2, 2, 4}, DType::Float64, 14);
  EXPECT_EQ(conv1d(x1.tensor, w1.tensor, std::nullopt, {1}, "same").sizes(), (Shape{1, 2, 10}));
}

TEST(Conv, UnbatchedInput) {
  const nn_test::Sample x = nn_test::random_sample({3, 7, 6}, DType::Float32, 21);
  const nn_test::Sample w = nn_test::random_sample({5, 3, 3, 3}, DType::Float32, 22);
  const Tensor y = conv2d(x.tensor, w.tensor, std::nullopt, {1}, {1});
  ASSERT_EQ(y.sizes(), (Shape{5, 7, 6}));
  EXPECT_EQ(to_doubles(y), to_doubles(conv2d(x.tensor.unsqueeze(0), w.tensor, std::nullopt, {1}, {1}).squeeze(0)));
}

}  // namespace
}  // namespace kiln
