// torch.nn.functional.interpolate (kiln/ops/interpolate.h), separable: one spatial dim
// at a time, nearest as an index_select, linear as two weighted index_selects.
#include "kiln/ops/interpolate.h"

#include <cmath>
#include <string>

#include "kiln/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

enum class Mode { Nearest, NearestExact, Linear };

// The source coordinate scale of one dim (PyTorch's area_pixel_compute_scale): its CPU
// kernels compute it in float, except the linear modes on float64 input (in double).
double coordinate_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale_factor,
                        bool in_double) {
  double scale = 0.0;
  if (align_corners) {
    scale = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  } else if (scale_factor && *scale_factor > 0) {
    scale = 1.0 / *scale_factor;
  } else {
    scale = static_cast<double>(in) / static_cast<double>(out);
  }
  return in_double ? scale : static_cast<float>(scale);
}

Tensor index_tensor(const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::Int64, kCPU, "interpolate");
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

// `values` as a tensor of `dtype` shaped to broadcast along dim d of an n-dim tensor.
Tensor weights_along(const std::vector<double>& values, DType dtype, int64_t d, int64_t ndim) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::Float64, kCPU, "interpolate");
  std::copy(values.begin(), values.end(), t.data<double>());
  Shape shape(ndim, 1);
  shape[d] = static_cast<int64_t>(values.size());
  return t.to(dtype).view(shape);
}

Tensor resize_dim(const Tensor& x, int64_t d, int64_t out, Mode mode, bool align_corners,
                  std::optional<double> scale_factor) {
  const int64_t in = x.size(d);
  const double scale =
      coordinate_scale(in, out, align_corners, scale_factor, mode == Mode::Linear && x.dtype() == DType::Float64);
  if (mode != Mode::Linear) {
    std::vector<int64_t> src(out);
    for (int64_t j = 0; j < out; ++j) {
      const double pos = mode == Mode::Nearest ? static_cast<float>(j * scale)
                                               : static_cast<float>((static_cast<double>(j) + 0.5) * scale);
      src[j] = std::min<int64_t>(static_cast<int64_t>(std::floor(pos)), in - 1);
    }
    return index_select(x, d, index_tensor(src));
  }
  std::vector<int64_t> i0(out), i1(out);
  std::vector<double> w0(out), w1(out);
  for (int64_t j = 0; j < out; ++j) {
    double pos = align_corners ? j * scale : std::max((static_cast<double>(j) + 0.5) * scale - 0.5, 0.0);
    i0[j] = std::min<int64_t>(static_cast<int64_t>(std::floor(pos)), in - 1);
    i1[j] = std::min<int64_t>(i0[j] + 1, in - 1);
    w1[j] = std::min(pos - static_cast<double>(i0[j]), 1.0);
    w0[j] = 1.0 - w1[j];
  }
  return add(mul(index_select(x, d, index_tensor(i0)), weights_along(w0, x.dtype(), d, x.dim())),
             mul(index_select(x, d, index_tensor(i1)), weights_along(w1, x.dtype(), d, x.dim())));
}

}  // namespace

Tensor interpolate(const Tensor& input, const std::vector<int64_t>& size, const std::vector<double>& scale_factor,
                   std::string_view mode, std::optional<bool> align_corners, bool recompute_scale_factor) {
  constexpr const char* op = "interpolate";
  check_defined(input, op, "input");
  const int64_t spatial = input.dim() - 2;
  KILN_CHECK(spatial >= 1 && spatial <= 3, op, "expected a 3-D, 4-D or 5-D input [N, C, *spatial], got {}",
             input.shape_str());
  KILN_CHECK_KIND(is_floating(input.dtype()), Type, op, "expected a floating-point input, got {}",
                  dtype_name(input.dtype()));
  Mode m;
  if (mode == "nearest") {
    m = Mode::Nearest;
  } else if (mode == "nearest-exact") {
    m = Mode::NearestExact;
  } else if ((mode == "linear" && spatial == 1) || (mode == "bilinear" && spatial == 2) ||
             (mode == "trilinear" && spatial == 3)) {
    m = Mode::Linear;
  } else {
    fail(ErrorKind::Value, op, "mode '{}' is not supported for {}-D input (expected nearest, nearest-exact, or {})",
         mode, input.dim(), spatial == 1 ? "linear" : spatial == 2 ? "bilinear" : "trilinear");
  }
  KILN_CHECK_KIND(m == Mode::Linear || !align_corners.has_value(), Value, op,
                  "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
                  "trilinear");
  KILN_CHECK_KIND(size.empty() != scale_factor.empty(), Value, op, "only one of size or scale_factor should be defined");
  const auto per_dim = [&](size_t n, const char* what) {
    KILN_CHECK_KIND(n == 1 || static_cast<int64_t>(n) == spatial, Value, op,
                    "{} must have one entry or one per spatial dim ({}), got {}", what, spatial, n);
  };
  per_dim(size.empty() ? scale_factor.size() : size.size(), size.empty() ? "scale_factor" : "size");
  Tensor out = input;
  for (int64_t i = 0; i < spatial; ++i) {
    const int64_t d = 2 + i;
    const int64_t in = input.size(d);
    int64_t target = 0;
    std::optional<double> factor;
    if (!size.empty()) {
      target = size.size() == 1 ? size[0] : size[i];
    } else {
      const double f = scale_factor.size() == 1 ? scale_factor[0] : scale_factor[i];
      KILN_CHECK_KIND(f > 0 && std::isfinite(f), Value, op, "scale_factor must be positive and finite, got {}", f);
      const double scaled = std::floor(static_cast<double>(in) * f);
      KILN_CHECK(scaled < 0x1p63, op, "scale_factor {} makes an output size past int64 at spatial dim {}", f, i);
      target = static_cast<int64_t>(scaled);
      if (!recompute_scale_factor) factor = f;
    }
    KILN_CHECK(target > 0 && in > 0, op, "Input and output sizes should be greater than 0, but got input ({}) and "
               "output ({}) sizes at spatial dim {}", in, target, i);
    out = resize_dim(out, d, target, m, align_corners.value_or(false), factor);
  }
  return out;
}

}  // namespace kiln
