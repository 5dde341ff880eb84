// Convolutions under autograd: gradcheck (finite differences, float64) of conv1d/2d/3d
// and conv_transpose1d/2d/3d in input, weight and bias, with contiguous, channels-last
// and strided leaves; gradgradcheck (the gradients are convolutions too); bad input.
#include <gtest/gtest.h>

#include "autograd_test_util.h"
#include "conv_test_reference.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/creation.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace autograd_test;
using conv_test::Layout;
using testing::expect_error;

Tensor cl_leaf(const Shape& sizes, uint64_t seed) {
  return conv_test::with_layout(leaf(sizes, seed).detach(), Layout::ChannelsLast).requires_grad_(true);
}

TEST(ConvAutograd, Conv2dGradcheck) {
  const auto f = [](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv2d(v[0], v[1], v[2], {2, 1}, {1, 0}, {1, 2}, 2)};
  };
  expect_gradcheck(f, {leaf({2, 4, 5, 6}, 1), leaf({4, 2, 2, 3}, 2), leaf({4}, 3)});
  expect_gradcheck(f, {transposed_leaf({1, 4, 5, 4}, 4), leaf({2, 2, 2, 2}, 5), leaf({2}, 6)});
  expect_gradcheck(f, {cl_leaf({2, 4, 5, 6}, 7), cl_leaf({4, 2, 2, 3}, 8), leaf({4}, 9)});
  expect_gradcheck(f, {strided_leaf({1, 4, 4, 5}, 10), leaf({2, 2, 3, 1}, 11), leaf({2}, 12)});
  // depthwise, padding 'same' with an even kernel (explicit extra zero on the right)
  expect_gradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv2d(v[0], v[1], std::nullopt, {1}, "same", {1}, 3)};
  }, {leaf({1, 3, 5, 4}, 13), leaf({3, 1, 2, 3}, 14)});
  // depthwise channels-last (the direct channel loops), multiplier 2, strided
  expect_gradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv2d(v[0], v[1], v[2], {2, 1}, {1, 0}, {1, 2}, 3)};
  }, {cl_leaf({2, 3, 5, 6}, 15), leaf({6, 1, 3, 2}, 16), leaf({6}, 17)});
}

TEST(ConvAutograd, Conv1dAnd3dGradcheck) {
  expect_gradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv1d(v[0], v[1], v[2], {1}, {3}, {1}, 4)};  // causal depthwise shape
  }, {leaf({2, 4, 7}, 20), leaf({4, 1, 4}, 21), leaf({4}, 22)});
  expect_gradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv1d(v[0], v[1], std::nullopt, {2}, {1}, {2})};
  }, {leaf({2, 3, 9}, 23), leaf({2, 3, 3}, 24)});
  const auto f3 = [](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv3d(v[0], v[1], v[2], {1, 2, 1}, {1, 0, 1}, {1, 1, 2})};
  };
  expect_gradcheck(f3, {leaf({1, 2, 3, 4, 5}, 25), leaf({3, 2, 2, 2, 2}, 26), leaf({3}, 27)});
  expect_gradcheck(f3, {cl_leaf({1, 2, 3, 4, 5}, 28), leaf({3, 2, 2, 2, 2}, 29), leaf({3}, 30)});
}

TEST(ConvAutograd, ConvTransposeGradcheck) {
  expect_gradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv_transpose2d(v[0], v[1], v[2], {2, 1}, {1, 0}, {1, 0}, 2, {1, 2})};
  }, {leaf({1, 4, 3, 4}, 40), leaf({4, 1, 3, 2}, 41), leaf({2}, 42)});
  expect_gradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv_transpose2d(v[0], v[1], std::nullopt, {2}, {1}, {1})};
  }, {cl_leaf({2, 3, 3, 3}, 43), leaf({3, 2, 3, 3}, 44)});
  expect_gradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv_transpose1d(v[0], v[1], v[2], {3}, {1}, {2}, 1, {1})};
  }, {leaf({2, 2, 4}, 45), leaf({2, 3, 3}, 46), leaf({3}, 47)});
  expect_gradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv_transpose3d(v[0], v[1], std::nullopt, {1, 2, 2}, {0, 1, 0})};
  }, {leaf({1, 2, 2, 3, 2}, 48), leaf({2, 2, 2, 2, 3}, 49)});
}

TEST(ConvAutograd, DoubleBackward) {
  expect_gradgradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv2d(v[0], v[1], v[2], {2, 1}, {1, 1}, {1, 1}, 2)};
  }, {leaf({1, 4, 4, 3}, 60), leaf({2, 2, 2, 2}, 61), leaf({2}, 62)});
  expect_gradgradcheck([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{conv_transpose1d(v[0], v[1], std::nullopt, {2}, {1}, {1})};
  }, {leaf({1, 2, 4}, 63), leaf({2, 2, 3}, 64)});
}

TEST(ConvErrors, PyTorchMessages) {
  const auto none = std::nullopt;
  expect_error([] { conv2d(ones({1, 4, 5, 5}), ones({2, 3, 3, 3})); }, ErrorKind::Runtime,
               "expected input[1, 4, 5, 5] to have 3 channels, but got 4 channels instead");
  expect_error([&] { conv2d(ones({1, 4, 5, 5}), ones({3, 2, 3, 3}), none, {1}, {0}, {1}, 2); }, ErrorKind::Runtime,
               "expected weight to be divisible by 2 at dimension 0");
  expect_error([&] { conv2d(ones({1, 5, 5, 5}), ones({4, 2, 3, 3}), none, {1}, {0}, {1}, 2); }, ErrorKind::Runtime,
               "to have 4 channels, but got 5 channels");
  expect_error([] { conv2d(ones({1, 1, 2, 2}), ones({1, 1, 3, 3})); }, ErrorKind::Runtime,
               "Kernel size can't be greater than actual input size");
  expect_error([] { conv2d(ones({4, 5}), ones({1, 1, 1, 1})); }, ErrorKind::Runtime,
               "Expected 3D (unbatched) or 4D (batched) input to conv2d");
  expect_error([] { conv1d(ones({1, 1, 4, 4}), ones({1, 1, 3})); }, ErrorKind::Runtime,
               "Expected 2D (unbatched) or 3D (batched) input to conv1d");
  expect_error([] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 3})); }, ErrorKind::Runtime,
               "Expected 3-dimensional input for 3-dimensional weight");
  expect_error([&] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), none, {0}); }, ErrorKind::Runtime,
               "non-positive stride is not supported");
  expect_error([&] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), none, {1}, {-1}); }, ErrorKind::Runtime,
               "negative padding is not supported");
  expect_error([&] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), none, {1}, {0}, {0}); }, ErrorKind::Runtime,
               "dilation should be greater than zero");
  expect_error([&] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), none, {1}, {0}, {1}, 0); }, ErrorKind::Runtime,
               "non-positive groups is not supported");
  expect_error([&] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}), none, {1, 1, 1}); }, ErrorKind::Runtime,
               "expected stride to be a single integer value or a list of 2 values");
  expect_error([] { conv2d(ones({1, 1, 4, 4}), ones({2, 1, 1, 1}), ones({3})); }, ErrorKind::Runtime,
               "expected bias to be 1-dimensional with 2 elements, but got bias of size [3]");
  expect_error([&] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), none, {2}, "same"); }, ErrorKind::Runtime,
               "padding='same' is not supported for strided convolutions");
  expect_error([&] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), none, {1}, "full"); }, ErrorKind::Runtime,
               "Invalid padding string: 'full'");
  expect_error([] { conv2d(ones({1, 1, 4, 4}, DType::Int64), ones({1, 1, 1, 1}, DType::Int64)); }, ErrorKind::Type,
               "not implemented for 'Long'");
  expect_error([] { conv2d(ones({1, 1, 4, 4}), ones({1, 1, 1, 1}, DType::Float64)); }, ErrorKind::Runtime,
               "Input type (float32) and weight type (float64) should be the same");
}

TEST(ConvErrors, TransposeAndSizes) {
  const auto none = std::nullopt;
  expect_error([&] { conv_transpose2d(ones({1, 1, 3, 3}), ones({1, 1, 3, 3}), none, {2}, {0}, {2}); },
               ErrorKind::Runtime, "output padding must be smaller than either stride or dilation");
  expect_error([] { conv_transpose2d(ones({1, 3, 3, 3}), ones({2, 1, 3, 3})); }, ErrorKind::Runtime,
               "Given transposed=1, weight of size [2, 1, 3, 3], expected input[1, 3, 3, 3] to have 2 channels");
  expect_error([&] { conv_transpose2d(ones({1, 1, 1, 1}), ones({1, 1, 1, 1}), none, {1}, {1}); }, ErrorKind::Runtime,
               "Output size is too small");
  // Hostile sizes: checked arithmetic, refused before anything is allocated.
  expect_error([&] { conv2d(ones({1, 1, 5, 5}), ones({1, 1, 3, 3}), none, {1}, {0}, {int64_t{1} << 62}); },
               ErrorKind::Runtime, "integer overflow");
  expect_error([&] { conv2d(ones({1, 1, 5, 5}), ones({1, 1, 3, 3}), none, {1}, {int64_t{1} << 62}); },
               ErrorKind::Runtime, "integer overflow");
  const Tensor wide = ones({1, 1, 1, 1}).expand({1, int64_t{1} << 16, 256, 256});
  expect_error([&] { conv2d(wide, ones({1, 1, 1, 1}).expand({1, int64_t{1} << 16, 256, 256})); },
               ErrorKind::NotImplemented, "exceeds 2^31 - 1");
  expect_error([] { convolution_backward(ones({1, 1, 3, 3}), ones({1, 1, 4, 4}), ones({1, 1, 3, 3}), {1}, {0}, {1},
                                         false, {0}, 1); },
               ErrorKind::Runtime, "grad_output of size [1, 1, 3, 3] does not match the convolution's output size");
  expect_error([] { convolution_weight_grad(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {-1, 1, 3, 3}, {1}, {0}, {1}, 1); },
               ErrorKind::Runtime, "weight_sizes must not be negative");
}

}  // namespace
}  // namespace kiln
