// conv1d / conv2d reference path (kiln/ops/conv.h): im2col by index_select, one matmul
// per group; every step a public op, so autograd differentiates it.
#include "kiln/ops/conv.h"

#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/pad.h"
#include "kiln/ops/shape.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

int64_t entry(const std::vector<int64_t>& v, int64_t i, const char* what, int64_t dims) {
  KILN_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == dims, "conv2d",
             "{} must have one entry or {}, got {}", what, dims, v.size());
  return v.size() == 1 ? v[0] : v[i];
}

// Rows o * stride + k * dilation of dim d, for k < K and o < out: [.., K * out, ..].
Tensor gather_windows(const Tensor& x, int64_t d, int64_t K, int64_t out, int64_t stride, int64_t dilation) {
  Tensor idx = Tensor::empty({checked_mul(K, out, "conv2d")}, DType::Int64, kCPU, "conv2d");
  int64_t* p = idx.data<int64_t>();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t o = 0; o < out; ++o) p[k * out + o] = o * stride + k * dilation;
  return index_select(x, d, idx);
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  constexpr const char* op = "conv2d";
  check_defined(input, op, "input");
  check_defined(weight, op, "weight");
  KILN_CHECK(input.dim() == 3 || input.dim() == 4, op,
             "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: {}", input.shape_str());
  if (input.dim() == 3) return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0);
  KILN_CHECK(weight.dim() == 4, op, "weight must be 4-D [O, C / groups, kh, kw], got {}", weight.shape_str());
  KILN_CHECK_KIND(groups > 0, Value, op, "non-positive groups is not supported (got {})", groups);
  const int64_t N = input.size(0), C = input.size(1), O = weight.size(0), kh = weight.size(2), kw = weight.size(3);
  KILN_CHECK(C % groups == 0 && O % groups == 0, op,
             "Given groups={}, expected input channels ({}) and output channels ({}) to be divisible by groups", groups,
             C, O);
  KILN_CHECK(weight.size(1) * groups == C, op,
             "Given groups={}, weight of size {}, expected input{} to have {} channels, but got {} channels instead",
             groups, weight.shape_str(), input.shape_str(), weight.size(1) * groups, C);
  if (bias) KILN_CHECK(bias->dim() == 1 && bias->size(0) == O, op, "bias must be [{}], got {}", O, bias->shape_str());
  int64_t s[2], pd[2], dl[2], out[2];
  const int64_t K[2] = {kh, kw};
  for (int64_t i = 0; i < 2; ++i) {
    s[i] = entry(stride, i, "stride", 2);
    pd[i] = entry(padding, i, "padding", 2);
    dl[i] = entry(dilation, i, "dilation", 2);
    KILN_CHECK_KIND(s[i] > 0 && dl[i] > 0, Value, op, "stride and dilation must be positive");
    KILN_CHECK(pd[i] >= 0, op, "negative padding is not supported");
    // Padding and dilation come from the caller: checked, so no size wraps past the test.
    const int64_t padded = checked_add(input.size(2 + i), checked_mul(2, pd[i], op), op);
    const int64_t span = checked_add(checked_mul(dl[i], K[i] - 1, op), 1, op);
    out[i] = (padded - span) / s[i] + 1;
    KILN_CHECK(padded - span >= 0 && out[i] >= 1, op,
               "Calculated padded input size per channel: ({} x {}). Kernel size: ({} x {}). Kernel size can't be "
               "greater than actual input size", input.size(2) + 2 * pd[0], input.size(3) + 2 * pd[1], kh, kw);
  }
  Tensor x = (pd[0] || pd[1]) ? pad(input, {pd[1], pd[1], pd[0], pd[0]}) : input;
  // [N, C, kh * oh, W] -> [N, C, kh * oh, kw * ow] -> [N, C, kh, oh, kw, ow]
  x = gather_windows(x, 2, kh, out[0], s[0], dl[0]);
  x = gather_windows(x, 3, kw, out[1], s[1], dl[1]);
  x = x.reshape({N, C, kh, out[0], kw, out[1]});
  std::vector<Tensor> per_group;
  const int64_t Cg = C / groups, Og = O / groups;
  for (int64_t g = 0; g < groups; ++g) {
    // cols [N, oh, ow, Cg * kh * kw] @ w_g^T [Cg * kh * kw, Og]
    Tensor cols = x.narrow(1, g * Cg, Cg).permute({0, 3, 5, 1, 2, 4}).reshape({N, out[0], out[1], Cg * kh * kw});
    Tensor w = weight.narrow(0, g * Og, Og).reshape({Og, Cg * kh * kw});
    per_group.push_back(matmul(cols, w.t()));
  }
  Tensor y = groups == 1 ? per_group[0] : cat(per_group, 3);
  if (bias) y = add(y, *bias);
  return y.permute({0, 3, 1, 2}).contiguous();
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  check_defined(input, "conv1d", "input");
  check_defined(weight, "conv1d", "weight");
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, "conv1d",
             "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: {}", input.shape_str());
  KILN_CHECK(weight.dim() == 3, "conv1d", "weight must be 3-D [O, C / groups, k], got {}", weight.shape_str());
  const auto one = [](const std::vector<int64_t>& v, int64_t fill) {
    KILN_CHECK(v.size() == 1, "conv1d", "expected one entry, got {}", v.size());
    return std::vector<int64_t>{fill, v[0]};
  };
  return conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, one(stride, 1), one(padding, 0), one(dilation, 1),
                groups)
      .squeeze(-2);
}

}  // namespace kiln
