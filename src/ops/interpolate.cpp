// torch.nn.functional.interpolate (kiln/ops/interpolate.h) and its adjoint. The front
// end validates, resolves each spatial axis's taps once with PyTorch's index formulas,
// and makes one call through the interpolate kernel table (backend/interpolate.h).
#include "kiln/ops/interpolate.h"

#include <array>
#include <cmath>
#include <string>

#include "backend/interpolate.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "ops/autograd_hooks.h"
#include "ops/nn_utils.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

constexpr const char* kOp = "interpolate";

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

// One axis's taps (backend::ResampleAxis points into these).
struct AxisTaps {
  int64_t in = 1, out = 1;
  std::vector<int64_t> i0, i1;
  std::vector<double> w0, w1;
};

void resolve_taps(AxisTaps& a, Mode mode, bool align_corners, std::optional<double> scale_factor, bool in_double) {
  const int64_t in = a.in, out = a.out;
  const double scale = coordinate_scale(in, out, align_corners, scale_factor, mode == Mode::Linear && in_double);
  a.i0.resize(out);
  if (mode != Mode::Linear) {
    for (int64_t j = 0; j < out; ++j) {
      const double pos = mode == Mode::Nearest ? static_cast<float>(j * scale)
                                               : static_cast<float>((static_cast<double>(j) + 0.5) * scale);
      a.i0[j] = std::min<int64_t>(static_cast<int64_t>(std::floor(pos)), in - 1);
    }
    return;
  }
  a.i1.resize(out);
  a.w0.resize(out);
  a.w1.resize(out);
  for (int64_t j = 0; j < out; ++j) {
    const double pos = align_corners ? j * scale : std::max((static_cast<double>(j) + 0.5) * scale - 0.5, 0.0);
    a.i0[j] = std::min<int64_t>(static_cast<int64_t>(std::floor(pos)), in - 1);
    a.i1[j] = std::min<int64_t>(a.i0[j] + 1, in - 1);
    a.w1[j] = std::min(pos - static_cast<double>(a.i0[j]), 1.0);
    a.w0[j] = 1.0 - a.w1[j];
  }
}

// What a call resolves to: the sizes on both sides and the taps of D, H, W (a 1-D or
// 2-D resize leaves the leading axes at 1 -> 1).
struct Plan {
  Shape input_sizes, output_sizes;
  int64_t planes = 1;
  std::array<AxisTaps, 3> axes;
};

Plan make_plan(const Shape& input_sizes, DType dtype, const std::vector<int64_t>& size,
               const std::vector<double>& scale_factor, std::string_view mode, std::optional<bool> align_corners,
               bool recompute_scale_factor) {
  const int64_t spatial = static_cast<int64_t>(input_sizes.size()) - 2;
  KILN_CHECK(spatial >= 1 && spatial <= 3, kOp, "expected a 3-D, 4-D or 5-D input [N, C, *spatial], got {}",
             shape_to_string(input_sizes));
  KILN_CHECK_KIND(is_floating(dtype), Type, kOp, "expected a floating-point input, got {}", dtype_name(dtype));
  KILN_CHECK_KIND(is_nn_float(dtype), Type, kOp, "expected float32, float64, bfloat16 or float16, got {}",
                  dtype_name(dtype));
  Mode m;
  if (mode == "nearest") {
    m = Mode::Nearest;
  } else if (mode == "nearest-exact") {
    m = Mode::NearestExact;
  } else if ((mode == "linear" && spatial == 1) || (mode == "bilinear" && spatial == 2) ||
             (mode == "trilinear" && spatial == 3)) {
    m = Mode::Linear;
  } else {
    fail(ErrorKind::Value, kOp, "mode '{}' is not supported for {}-D input (expected nearest, nearest-exact, or {})",
         mode, input_sizes.size(), spatial == 1 ? "linear" : spatial == 2 ? "bilinear" : "trilinear");
  }
  KILN_CHECK_KIND(m == Mode::Linear || !align_corners.has_value(), Value, kOp,
                  "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | "
                  "trilinear");
  KILN_CHECK_KIND(size.empty() != scale_factor.empty(), Value, kOp, "only one of size or scale_factor should be defined");
  const size_t entries = size.empty() ? scale_factor.size() : size.size();
  KILN_CHECK_KIND(entries == 1 || static_cast<int64_t>(entries) == spatial, Value, kOp,
                  "{} must have one entry or one per spatial dim ({}), got {}", size.empty() ? "scale_factor" : "size",
                  spatial, entries);
  Plan plan;
  plan.input_sizes = input_sizes;
  plan.output_sizes = input_sizes;
  plan.planes = checked_mul(input_sizes[0], input_sizes[1], kOp);
  for (int64_t i = 0; i < spatial; ++i) {
    const int64_t d = 2 + i;
    const int64_t in = input_sizes[d];
    int64_t target = 0;
    std::optional<double> factor;
    if (!size.empty()) {
      target = size.size() == 1 ? size[0] : size[i];
    } else {
      const double f = scale_factor.size() == 1 ? scale_factor[0] : scale_factor[i];
      KILN_CHECK_KIND(f > 0 && std::isfinite(f), Value, kOp, "scale_factor must be positive and finite, got {}", f);
      const double scaled = std::floor(static_cast<double>(in) * f);
      KILN_CHECK(scaled < 0x1p63, kOp, "scale_factor {} makes an output size past int64 at spatial dim {}", f, i);
      target = static_cast<int64_t>(scaled);
      if (!recompute_scale_factor) factor = f;
    }
    KILN_CHECK(target > 0 && in > 0, kOp, "Input and output sizes should be greater than 0, but got input ({}) and "
               "output ({}) sizes at spatial dim {}", in, target, i);
    plan.output_sizes[d] = target;
    AxisTaps& axis = plan.axes[3 - spatial + i];
    axis.in = in;
    axis.out = target;
    resolve_taps(axis, m, align_corners.value_or(false), factor, dtype == DType::Float64);
  }
  for (int64_t i = 0; i < 3 - spatial; ++i) plan.axes[i].i0 = {0};  // the unused 1 -> 1 axes
  shape_numel(plan.output_sizes, kOp);  // the output's element count must fit
  return plan;
}

// Runs the forward (backward = false: src is the input) or the adjoint (src is the
// output gradient) of `plan` on `src`.
Tensor run(const Plan& plan, const Tensor& src, bool backward) {
  const Shape& dst_sizes = backward ? plan.input_sizes : plan.output_sizes;
  const auto kernels = backend::interpolate_kernels.on(src.device(), kOp);
  const auto kernel = backward ? kernels.backward : kernels.forward;
  const Tensor in = src.contiguous();
  Tensor out = Tensor::empty(dst_sizes, src.dtype(), src.device(), kOp);
  if (out.numel() == 0) return out;
  backend::ResampleProblem p{};
  p.dtype = src.dtype();
  p.planes = plan.planes;
  for (int a = 0; a < 3; ++a) {
    const AxisTaps& t = plan.axes[a];
    p.axes[a] = {t.in, t.out, t.i0.data(), t.i1.empty() ? nullptr : t.i1.data(),
                 t.w0.empty() ? nullptr : t.w0.data(), t.w1.empty() ? nullptr : t.w1.data()};
  }
  p.src = in.data_ptr();
  p.dst = out.data_ptr();
  {
    const OpProfile profile(kOp, [&] { return OpCost{tensor_bytes({&in, &out}), 0}; });
    kernel(current_context(), p);
  }
  // PyTorch keeps a channels-last source channels-last. The kernels work on row-major
  // planes, so a channels-last source is copied in and the result copied back out. A
  // direct channels-last kernel (channels innermost, each tap moving a run of C values)
  // would save those two passes but needs its own loops in the kernel table's problem
  // and a timing on a quiet machine against this path; not done yet.
  const MemoryFormat format = src.suggest_memory_format();
  return format == MemoryFormat::Contiguous ? out : out.contiguous(format);
}

}  // namespace

Tensor interpolate(const Tensor& input, const std::vector<int64_t>& size, const std::vector<double>& scale_factor,
                   std::string_view mode, std::optional<bool> align_corners, bool recompute_scale_factor) {
  check_defined(input, kOp, "input");
  KILN_AUTOGRAD(interpolate, input, size, scale_factor, mode, align_corners, recompute_scale_factor);
  const Plan plan =
      make_plan(input.sizes(), input.dtype(), size, scale_factor, mode, align_corners, recompute_scale_factor);
  return run(plan, input, /*backward=*/false);
}

Tensor interpolate_backward(const Tensor& grad_output, const Shape& input_sizes, const std::vector<int64_t>& size,
                            const std::vector<double>& scale_factor, std::string_view mode,
                            std::optional<bool> align_corners, bool recompute_scale_factor) {
  check_defined(grad_output, "interpolate_backward", "grad_output");
  KILN_AUTOGRAD(interpolate_backward, grad_output, input_sizes, size, scale_factor, mode, align_corners,
                recompute_scale_factor);
  const Plan plan =
      make_plan(input_sizes, grad_output.dtype(), size, scale_factor, mode, align_corners, recompute_scale_factor);
  KILN_CHECK(grad_output.sizes() == plan.output_sizes, "interpolate_backward",
             "expected grad_output of size {} (the output of an input of size {}), got {}",
             shape_to_string(plan.output_sizes), shape_to_string(input_sizes), grad_output.shape_str());
  return run(plan, grad_output, /*backward=*/true);
}

}  // namespace kiln
