// conv_transpose1d/2d/3d and their backward against the scatter reference
// (conv_test_reference.h), every float dtype, contiguous / channels-last / strided.
#include <gtest/gtest.h>

#include <string>

#include "conv_test_reference.h"
#include "kiln/ops/conv.h"

namespace kiln {
namespace {

using conv_test::Case;
using conv_test::Layout;
using conv_test::Ref;

Shape full(int64_t lead0, int64_t lead1, const Shape& spatial) {
  Shape s{lead0, lead1};
  s.insert(s.end(), spatial.begin(), spatial.end());
  return s;
}

Tensor conv_transpose_nd(const Case& c, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
  switch (c.in.size()) {
    case 1: return conv_transpose1d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
    case 2: return conv_transpose2d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
    default: return conv_transpose3d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
  }
}

void check_case(const Case& c, DType dtype, Layout layout, uint32_t seed) {
  SCOPED_TRACE("case seed " + std::to_string(seed) + " " + std::string(dtype_name(dtype)) + " layout " +
               std::to_string(static_cast<int>(layout)));
  const Shape out = conv_test::transpose_out(c);
  const nn_test::Sample x = nn_test::random_sample(full(c.N, c.C, c.in), dtype, seed);
  const nn_test::Sample w = nn_test::random_sample(full(c.C, c.O / c.groups, c.kernel), dtype, seed + 1);
  const nn_test::Sample b = nn_test::random_sample({c.O}, dtype, seed + 2);
  const nn_test::Sample gy = nn_test::random_sample(full(c.N, c.O, out), dtype, seed + 3);
  const Tensor xt = conv_test::with_layout(x.tensor, layout), gyt = conv_test::with_layout(gy.tensor, layout);
  const int64_t taps = conv_test::spatial_numel(c.kernel), P = conv_test::spatial_numel(out);

  const Tensor y = conv_transpose_nd(c, xt, w.tensor, b.tensor);
  ASSERT_EQ(y.sizes(), full(c.N, c.O, out));
  if (layout == Layout::ChannelsLast && y.numel() > 0) EXPECT_TRUE(conv_test::has_channels_last_strides(y));
  conv_test::expect_near_ref(y, conv_test::conv_transpose_ref(c, x.values, w.values, &b.values), dtype,
                             (c.C / c.groups) * taps + 1, "forward");

  auto [gx, gw, gb] = convolution_backward(gyt, xt, w.tensor, c.stride, c.padding, c.dilation, true,
                                           c.output_padding, c.groups);
  if (layout == Layout::ChannelsLast && gx.numel() > 0) EXPECT_TRUE(conv_test::has_channels_last_strides(gx));
  // The adjoint of conv_transpose is the conv from its output back to its input.
  const Case back{c.N, c.O, c.C, c.groups, out, c.kernel, c.stride, c.padding, c.dilation};
  const Ref gx_ref = conv_test::crop(conv_test::conv_ref(back, gy.values, w.values, nullptr), c.N, c.C,
                                     conv_test::conv_out(back), c.in);
  conv_test::expect_near_ref(gx, gx_ref, dtype,
                             (c.O / c.groups) * taps, "grad_input");
  conv_test::expect_near_ref(gw, conv_test::weight_grad_ref(back, out, c.in, gy.values, x.values), dtype,
                             c.N * conv_test::spatial_numel(c.in), "grad_weight");
  conv_test::expect_near_ref(gb, conv_test::bias_grad_ref(c.N, c.O, P, gy.values), dtype, c.N * P, "grad_bias");
}

TEST(ConvTranspose, EveryDimDtypeAndLayout) {
  const std::vector<Case> cases = {
      {2, 4, 6, 1, {5, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 0}},
      {1, 6, 4, 2, {4, 5}, {2, 3}, {3, 1}, {0, 1}, {2, 1}, {2, 0}},
      {2, 4, 8, 4, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0}},  // depthwise x2
      {1, 3, 5, 1, {8, 9}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, {0, 0}},  // 1x1
      {0, 3, 2, 1, {3, 3}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, {0, 0}},  // empty batch
      {1, 8, 16, 1, {17, 9}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {0, 1}},
      {2, 5, 3, 1, {9}, {4}, {2}, {1}, {1}, {1}},
      {1, 8, 8, 8, {16}, {4}, {1}, {3}, {1}, {0}},  // depthwise 1-D
      {1, 4, 2, 2, {7}, {3}, {3}, {0}, {2}, {2}},
      {2, 2, 3, 1, {3, 4, 3}, {2, 3, 2}, {2, 1, 2}, {0, 1, 0}, {1, 1, 1}, {1, 0, 1}},
      {1, 4, 4, 2, {2, 3, 4}, {3, 2, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}, {0, 1, 0}},
  };
  uint32_t seed = 500;
  for (const Case& c : cases)
    for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16})
      for (Layout layout : {Layout::Contiguous, Layout::ChannelsLast, Layout::Strided}) {
        if (layout == Layout::ChannelsLast && c.in.size() == 1) continue;
        check_case(c, dtype, layout, seed);
        seed += 11;
      }
}

// output_padding may reach dilation - 1 when it is not below stride: the trailing
// outputs get only the bias, and the backward drops them.
TEST(ConvTranspose, OutputPaddingBelowDilationOnly) {
  const Case c{1, 2, 3, 1, {5}, {3}, {1}, {0}, {3}, {2}};
  check_case(c, DType::Float64, Layout::Contiguous, 900);
}

}  // namespace
}  // namespace kiln
