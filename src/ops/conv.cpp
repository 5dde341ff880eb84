// Convolution front ends (kiln/ops/conv.h): PyTorch's shape rules and messages, the
// memory format, then one call through the conv kernel table (backend/conv.h).
//
// conv_transpose is the input gradient of the conv that maps its output back to its
// input, so the table's three kernels cover conv, conv_transpose and both backward
// passes. The gradients of `convolution` are themselves `convolution` and
// `convolution_weight_grad` calls, so double backward works.
#include "kiln/ops/conv.h"

#include <climits>
#include <string>

#include "backend/conv.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/pad.h"
#include "kiln/ops/reduce.h"
#include "ops/autograd_hooks.h"
#include "ops/nn_utils.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

using backend::ConvGeometry;

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// PyTorch's is_channels_last_strides_2d / _3d: whether a 4-D / 5-D tensor's strides
// order its dims as N, spatial (last first), C innermost, with its rules for ambiguous
// size-1 dims (a contiguous [N, C, 1, 1] stays contiguous).
bool channels_last_strides(const Tensor& t) {
  if (t.dim() != 4 && t.dim() != 5) return false;
  const Shape& sizes = t.sizes();
  const Shape& strides = t.strides();
  if (strides[1] == 0) return false;
  const std::vector<int64_t> order = t.dim() == 4 ? std::vector<int64_t>{1, 3, 2, 0} : std::vector<int64_t>{1, 4, 3, 2, 0};
  int64_t min = 0;
  for (int64_t d : order) {
    if (sizes[d] == 0 || strides[d] < min) return false;
    if (d == 0 && min == strides[1]) return false;
    min = strides[d];
    if (sizes[d] > 1) min *= sizes[d];
  }
  return true;
}

// [N, C, *spatial] <-> [N, *spatial, C] (also [O, C, *kernel] <-> [O, *kernel, C]).
Shape to_last(int64_t ndim) {
  Shape p{0};
  for (int64_t d = 2; d < ndim; ++d) p.push_back(d);
  p.push_back(1);
  return p;
}
Shape from_last(int64_t ndim) {
  Shape p{0, ndim - 1};
  for (int64_t d = 1; d < ndim - 1; ++d) p.push_back(d);
  return p;
}

// The values of t as a kernel reads them: dense in the layout, in the compute dtype.
Tensor kernel_operand(const Tensor& t, bool channels_last, DType compute) {
  const Tensor ordered = channels_last ? t.permute(to_last(t.dim())) : t;
  return ordered.contiguous().to(compute);
}

// The dense tensor a kernel writes for a result of `sizes`, in the layout.
Tensor dense_result(const Shape& sizes, bool channels_last, DType dtype, Device device) {
  if (!channels_last) return Tensor::empty(sizes, dtype, device);
  Shape permuted;
  for (int64_t d : to_last(static_cast<int64_t>(sizes.size()))) permuted.push_back(sizes[d]);
  return Tensor::empty(permuted, dtype, device);
}

// The dense result as the op returns it: out_dtype, [N, C, *spatial] with the layout's strides.
Tensor logical_result(const Tensor& dense, bool channels_last, DType out_dtype) {
  const Tensor t = dense.to(out_dtype);
  return channels_last ? t.permute(from_last(t.dim())) : t;
}

// t with channels-last strides (a copy unless it has them).
Tensor as_channels_last(const Tensor& t) {
  return channels_last_strides(t) ? t : t.permute(to_last(t.dim())).contiguous().permute(from_last(t.dim()));
}

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

std::vector<int64_t> expand_list(const char* op, const char* name, const std::vector<int64_t>& v, int64_t spatial) {
  KILN_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == spatial, op,
             "expected {} to be a single integer value or a list of {} values to match the convolution dimensions, "
             "but got {}={}",
             name, spatial, name, list_str(v));
  return v.size() == 1 ? std::vector<int64_t>(static_cast<size_t>(spatial), v[0]) : v;
}

ConvParams expand_params(const char* op, int64_t spatial, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool transposed,
                         const std::vector<int64_t>& output_padding, int64_t groups) {
  ConvParams p;
  p.stride = expand_list(op, "stride", stride, spatial);
  p.padding = expand_list(op, "padding", padding, spatial);
  p.dilation = expand_list(op, "dilation", dilation, spatial);
  p.output_padding = expand_list(op, "output_padding", output_padding, spatial);
  p.transposed = transposed;
  p.groups = groups;
  for (int64_t i = 0; i < spatial; ++i) {
    KILN_CHECK(p.stride[i] > 0, op, "non-positive stride is not supported (got stride={})", list_str(stride));
    KILN_CHECK(p.padding[i] >= 0, op, "negative padding is not supported (got padding={})", list_str(padding));
    KILN_CHECK(p.dilation[i] > 0, op, "dilation should be greater than zero (got dilation={})", list_str(dilation));
    KILN_CHECK(p.output_padding[i] >= 0, op, "negative output_padding is not supported (got output_padding={})",
               list_str(output_padding));
  }
  KILN_CHECK(groups > 0, op, "non-positive groups is not supported (got groups={})", groups);
  return p;
}

// What validation yields: the result's sizes and the underlying conv's geometry (for a
// transposed conv, the conv whose input gradient it is).
struct Plan {
  int64_t spatial = 0;
  Shape out_sizes;
  ConvGeometry g;
};

void check_gemm_extent(const char* op, int64_t v, const char* what) {
  KILN_CHECK_KIND(v <= INT_MAX, NotImplemented, op,
                  "{} ({}) exceeds 2^31 - 1, the largest extent kiln's GEMM convolution takes", what, v);
}

// Checks input sizes and weight sizes against the parameters, PyTorch's
// check_shape_forward in order, and computes the output size.
Plan plan_geometry(const char* op, const Shape& in, const Shape& w, const ConvParams& p) {
  const int64_t spatial = static_cast<int64_t>(w.size()) - 2;
  Plan plan;
  plan.spatial = spatial;
  ConvGeometry& g = plan.g;
  const int64_t N = in[0], C = in[1];
  KILN_CHECK(w[0] % p.groups == 0, op,
             "Given groups={}, expected weight to be divisible by {} at dimension 0, but got weight of size {} instead",
             p.groups, p.groups, list_str(w));
  for (int64_t i = 0; i < spatial; ++i)
    KILN_CHECK(w[2 + i] > 0, op, "weight of size {} has an empty kernel dim", list_str(w));
  int64_t out_channels;
  if (!p.transposed) {
    KILN_CHECK(C == checked_mul(w[1], p.groups, op), op,
               "Given groups={}, weight of size {}, expected input{} to have {} channels, but got {} channels instead",
               p.groups, list_str(w), list_str(in), w[1] * p.groups, C);
    out_channels = w[0];
  } else {
    KILN_CHECK(C == w[0], op,
               "Given transposed=1, weight of size {}, expected input{} to have {} channels, but got {} channels "
               "instead",
               list_str(w), list_str(in), w[0], C);
    out_channels = checked_mul(w[1], p.groups, op);
  }
  plan.out_sizes = {N, out_channels};
  // Canonical 3-D: 1-D and 2-D problems get size-1 leading spatial dims.
  const int64_t lead = 3 - spatial;
  std::vector<int64_t> padded(spatial), span(spatial), outs(spatial);
  bool too_small = false;
  for (int64_t i = 0; i < spatial; ++i) {
    padded[i] = checked_add(in[2 + i], checked_mul(2, p.padding[i], op), op);
    span[i] = checked_add(checked_mul(p.dilation[i], w[2 + i] - 1, op), 1, op);
    if (!p.transposed) {
      too_small = too_small || padded[i] < span[i];
      outs[i] = padded[i] < span[i] ? 0 : (padded[i] - span[i]) / p.stride[i] + 1;
    } else {
      KILN_CHECK(p.output_padding[i] < p.stride[i] || p.output_padding[i] < p.dilation[i], op,
                 "output padding must be smaller than either stride or dilation, but got output_padding={} "
                 "stride={} dilation={}",
                 list_str(p.output_padding), list_str(p.stride), list_str(p.dilation));
      // (in - 1) s - 2 p + d (k - 1) + output_padding + 1
      const int64_t grown = checked_add(checked_mul(in[2 + i] - 1, p.stride[i], op),
                                        checked_add(span[i], p.output_padding[i], op), op);
      outs[i] = grown - 2 * p.padding[i];
      too_small = too_small || outs[i] < 1;
    }
  }
  if (too_small) {
    std::string a, b;
    for (int64_t i = 0; i < spatial; ++i) {
      a += (i ? " x " : "") + std::to_string(p.transposed ? in[2 + i] : padded[i]);
      b += (i ? " x " : "") + std::to_string(p.transposed ? outs[i] : span[i]);
    }
    if (!p.transposed)
      fail(ErrorKind::Runtime, op,
           "Calculated padded input size per channel: ({}). Kernel size: ({}). Kernel size can't be greater than "
           "actual input size",
           a, b);
    fail(ErrorKind::Runtime, op,
         "Given input size per channel: ({}). Calculated output size per channel: ({}). Output size is too small", a,
         b);
  }
  for (int64_t i = 0; i < spatial; ++i) plan.out_sizes.push_back(outs[i]);

  g.batch = N;
  g.groups = p.groups;
  g.in_channels = p.transposed ? out_channels : C;
  g.out_channels = p.transposed ? C : out_channels;
  for (int64_t i = 0; i < spatial; ++i) {
    g.in[lead + i] = p.transposed ? outs[i] : in[2 + i];
    g.out[lead + i] = p.transposed ? in[2 + i] : outs[i];
    g.kernel[lead + i] = w[2 + i];
    g.stride[lead + i] = p.stride[i];
    g.padding[lead + i] = p.padding[i];
    g.dilation[lead + i] = p.dilation[i];
  }
  // OpenBLAS takes int extents: the reduction, the position counts and the channels.
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  check_gemm_extent(op, checked_mul(g.in_channels / g.groups, taps, op), "channels / groups x kernel size");
  check_gemm_extent(op, checked_mul(g.out_channels / g.groups, taps, op), "out channels / groups x kernel size");
  check_gemm_extent(op, checked_mul(checked_mul(g.in[0], g.in[1], op), g.in[2], op), "input positions");
  check_gemm_extent(op, checked_mul(checked_mul(g.out[0], g.out[1], op), g.out[2], op), "output positions");
  check_gemm_extent(op, std::max(g.in_channels, g.out_channels), "channels");
  return plan;
}

void check_float(const char* op, const Tensor& t, const char* name, DType want) {
  KILN_CHECK_KIND(is_nn_float(t.dtype()), Type, op,
                  "\"{}\" not implemented for '{}' ({} of dtype {}; expected float32, float64, float16 or bfloat16)",
                  op, torch_type_name(t.dtype()), name, dtype_name(t.dtype()));
  KILN_CHECK(t.dtype() == want, op, "Input type ({}) and {} type ({}) should be the same", dtype_name(want), name,
             dtype_name(t.dtype()));
}

Plan plan_convolution(const char* op, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                      const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                      const std::vector<int64_t>& dilation, bool transposed,
                      const std::vector<int64_t>& output_padding, int64_t groups) {
  check_defined(input, op, "input");
  check_defined(weight, op, "weight");
  KILN_CHECK(weight.dim() >= 3 && weight.dim() <= 5, op,
             "weight must have 3, 4 or 5 dims ([out, in / groups, *kernel]), got weight of size {}",
             weight.shape_str());
  KILN_CHECK(input.dim() == weight.dim(), op,
             "Expected {}-dimensional input for {}-dimensional weight {}, but got {}-dimensional input of size {} "
             "instead",
             weight.dim(), weight.dim(), weight.shape_str(), input.dim(), input.shape_str());
  check_float(op, input, "input", input.dtype());
  check_float(op, weight, "weight", input.dtype());
  if (bias) {
    check_defined(*bias, op, "bias");
    check_float(op, *bias, "bias", input.dtype());
  }
  common_device(op, {&input, &weight, bias ? &*bias : nullptr});
  const ConvParams p =
      expand_params(op, weight.dim() - 2, stride, padding, dilation, transposed, output_padding, groups);
  Plan plan = plan_geometry(op, input.sizes(), weight.sizes(), p);
  if (bias)
    KILN_CHECK(bias->dim() == 1 && bias->size(0) == plan.out_sizes[1], op,
               "Given weight of size {}, expected bias to be 1-dimensional with {} elements, but got bias of size {} "
               "instead",
               weight.shape_str(), plan.out_sizes[1], bias->shape_str());
  return plan;
}

DType conv_compute_dtype(DType t) { return t == DType::Float64 ? DType::Float64 : DType::Float32; }

// bias [O] shaped to broadcast over a dense result in the layout.
Tensor bias_view(const Tensor& b, bool channels_last, int64_t spatial) {
  Shape s{b.numel()};
  if (!channels_last) s.insert(s.end(), static_cast<size_t>(spatial), 1);
  return b.view(s);
}

double conv_flops(const ConvGeometry& g) {
  const double taps = static_cast<double>(g.kernel[0] * g.kernel[1] * g.kernel[2]);
  const double positions = static_cast<double>(g.out[0] * g.out[1] * g.out[2]);
  return 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.out_channels) * positions * taps *
         static_cast<double>(g.in_channels / g.groups);
}

Tensor run_convolution(const char* op, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& dilation, bool transposed,
                       const std::vector<int64_t>& output_padding, int64_t groups) {
  Plan plan = plan_convolution(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  const bool cl = plan.spatial >= 2 && (channels_last_strides(input) || channels_last_strides(weight));
  const DType compute = conv_compute_dtype(input.dtype());
  plan.g.dtype = compute;
  plan.g.channels_last = cl;
  const Device device = input.device();
  Tensor out = dense_result(plan.out_sizes, cl, compute, device);
  if (out.numel() == 0) return logical_result(out, cl, input.dtype());
  const Tensor b = bias ? bias->contiguous().to(compute) : Tensor();
  if (plan.g.in_channels == 0 || plan.g.out_channels == 0) {
    out.zero_();  // an empty reduction: only the bias
    if (bias) add_(out, bias_view(b, cl, plan.spatial));
    return logical_result(out, cl, input.dtype());
  }
  const Tensor x = kernel_operand(input, cl, compute), w = kernel_operand(weight, cl, compute);
  const auto& kernels = backend::conv_kernels.on(device, op);
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&x, &w, &out}), conv_flops(plan.g)}; });
  const ExecutionContext ctx = current_context();
  if (!transposed) {
    require_kernel(kernels.forward, device, op)(ctx, {plan.g, x.data_ptr(), w.data_ptr(),
                                                      bias ? b.data_ptr() : nullptr, out.data_ptr()});
  } else {
    require_kernel(kernels.input_grad, device, op)(ctx, {plan.g, x.data_ptr(), w.data_ptr(), out.data_ptr()});
    if (bias) add_(out, bias_view(b, cl, plan.spatial));
  }
  return logical_result(out, cl, input.dtype());
}

// conv1d/2d/3d: unbatched input, then the padding modes.
Tensor conv_nd(const char* op, int64_t spatial, const Tensor& input, const Tensor& weight,
               const std::optional<Tensor>& bias, const std::vector<int64_t>& stride, const ConvPadding& padding,
               const std::vector<int64_t>& dilation, int64_t groups) {
  check_defined(input, op, "input");
  check_defined(weight, op, "weight");
  KILN_CHECK(input.dim() == spatial + 1 || input.dim() == spatial + 2, op,
             "Expected {}D (unbatched) or {}D (batched) input to {}, but got input of size: {}", spatial + 1,
             spatial + 2, op, input.shape_str());
  const bool batched = input.dim() == spatial + 2;
  Tensor x = batched ? input : input.unsqueeze(0);
  std::vector<int64_t> amounts = padding.amounts;
  if (!padding.mode.empty()) {
    KILN_CHECK(padding.mode == "valid" || padding.mode == "same", op,
               "Invalid padding string: '{}' (expected 'valid', 'same' or amounts)", padding.mode);
    amounts.assign(static_cast<size_t>(spatial), 0);
    if (padding.mode == "same") {
      const std::vector<int64_t> s = expand_list(op, "stride", stride, spatial);
      const std::vector<int64_t> d = expand_list(op, "dilation", dilation, spatial);
      for (int64_t v : s) KILN_CHECK(v == 1, op, "padding='same' is not supported for strided convolutions");
      KILN_CHECK(weight.dim() == spatial + 2, op, "Expected {}-dimensional weight for {}, but got weight of size {}",
                 spatial + 2, op, weight.shape_str());
      // total = d (k - 1), left = total / 2; an odd total pads the extra zero on the
      // right, explicitly (PyTorch's _convolution_same).
      std::vector<int64_t> extra(static_cast<size_t>(2 * spatial), 0);
      bool asymmetric = false;
      for (int64_t i = 0; i < spatial; ++i) {
        KILN_CHECK(d[i] > 0, op, "dilation should be greater than zero (got dilation={})", list_str(dilation));
        const int64_t total = checked_mul(d[i], weight.size(2 + i) - 1, op);
        amounts[i] = total / 2;
        if (total % 2 != 0) {
          asymmetric = true;
          extra[static_cast<size_t>(2 * (spatial - 1 - i) + 1)] = 1;  // pad pairs run from the last dim
        }
      }
      if (asymmetric) {
        const bool channels_last = channels_last_strides(x);
        x = pad(x, extra, "constant", 0.0);
        if (channels_last) x = as_channels_last(x);  // pad's output is contiguous; keep the format
      }
    }
  }
  plan_convolution(op, x, weight, bias, stride, amounts, dilation, false, {0}, groups);
  const Tensor y = convolution(x, weight, bias, stride, amounts, dilation, false, {0}, groups);
  return batched ? y : y.squeeze(0);
}

Tensor conv_transpose_nd(const char* op, int64_t spatial, const Tensor& input, const Tensor& weight,
                         const std::optional<Tensor>& bias, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding, const std::vector<int64_t>& output_padding,
                         int64_t groups, const std::vector<int64_t>& dilation) {
  check_defined(input, op, "input");
  KILN_CHECK(input.dim() == spatial + 1 || input.dim() == spatial + 2, op,
             "Expected {}D (unbatched) or {}D (batched) input to {}, but got input of size: {}", spatial + 1,
             spatial + 2, op, input.shape_str());
  const bool batched = input.dim() == spatial + 2;
  const Tensor x = batched ? input : input.unsqueeze(0);
  plan_convolution(op, x, weight, bias, stride, padding, dilation, true, output_padding, groups);
  const Tensor y = convolution(x, weight, bias, stride, padding, dilation, true, output_padding, groups);
  return batched ? y : y.squeeze(0);
}

}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              const std::vector<int64_t>& stride, const ConvPadding& padding, const std::vector<int64_t>& dilation,
              int64_t groups) {
  return conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              const std::vector<int64_t>& stride, const ConvPadding& padding, const std::vector<int64_t>& dilation,
              int64_t groups) {
  return conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              const std::vector<int64_t>& stride, const ConvPadding& padding, const std::vector<int64_t>& dilation,
              int64_t groups) {
  return conv_nd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups);
}

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& output_padding, int64_t groups,
                        const std::vector<int64_t>& dilation) {
  return conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation);
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& output_padding, int64_t groups,
                        const std::vector<int64_t>& dilation) {
  return conv_transpose_nd("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation);
}
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& output_padding, int64_t groups,
                        const std::vector<int64_t>& dilation) {
  return conv_transpose_nd("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation);
}

Tensor convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                   const std::vector<int64_t>& dilation, bool transposed, const std::vector<int64_t>& output_padding,
                   int64_t groups) {
  KILN_AUTOGRAD(convolution, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  return run_convolution("convolution", input, weight, bias, stride, padding, dilation, transposed, output_padding,
                         groups);
}

Tensor convolution_weight_grad(const Tensor& input, const Tensor& grad_output, const Shape& weight_sizes,
                               const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                               const std::vector<int64_t>& dilation, int64_t groups) {
  KILN_AUTOGRAD(convolution_weight_grad, input, grad_output, weight_sizes, stride, padding, dilation, groups);
  constexpr const char* op = "convolution_weight_grad";
  check_defined(input, op, "input");
  check_defined(grad_output, op, "grad_output");
  KILN_CHECK(weight_sizes.size() >= 3 && weight_sizes.size() <= 5, op,
             "weight_sizes must have 3, 4 or 5 entries, got {}", list_str(weight_sizes));
  for (int64_t v : weight_sizes)
    KILN_CHECK(v >= 0, op, "weight_sizes must not be negative, got {}", list_str(weight_sizes));
  const int64_t ndim = static_cast<int64_t>(weight_sizes.size());
  KILN_CHECK(input.dim() == ndim && grad_output.dim() == ndim, op,
             "expected {}-D input and grad_output for weight_sizes {}, got input of size {} and grad_output of size {}",
             ndim, list_str(weight_sizes), input.shape_str(), grad_output.shape_str());
  check_float(op, input, "input", input.dtype());
  check_float(op, grad_output, "grad_output", input.dtype());
  common_device(op, {&input, &grad_output});
  const ConvParams p = expand_params(op, ndim - 2, stride, padding, dilation, false, {0}, groups);
  Plan plan = plan_geometry(op, input.sizes(), weight_sizes, p);
  // grad_output may cover fewer positions than the conv produces: conv_transpose with
  // output_padding >= stride has outputs no input position reads back.
  bool fits = grad_output.size(0) == plan.out_sizes[0] && grad_output.size(1) == plan.out_sizes[1];
  for (int64_t i = 0; i < plan.spatial; ++i) {
    const int64_t o = grad_output.size(2 + i);
    fits = fits && o >= 1 && o <= plan.out_sizes[2 + i];
    plan.g.out[3 - plan.spatial + i] = o;
  }
  KILN_CHECK(fits, op, "grad_output of size {} does not match the convolution's output size {}",
             grad_output.shape_str(), list_str(plan.out_sizes));
  const bool cl = plan.spatial >= 2 && (channels_last_strides(input) || channels_last_strides(grad_output));
  const DType compute = conv_compute_dtype(input.dtype());
  plan.g.dtype = compute;
  plan.g.channels_last = cl;
  Tensor gw = dense_result(weight_sizes, cl, compute, input.device());
  if (gw.numel() == 0) return logical_result(gw, cl, input.dtype());
  const Tensor x = kernel_operand(input, cl, compute), gy = kernel_operand(grad_output, cl, compute);
  const auto& kernels = backend::conv_kernels.on(input.device(), op);
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&x, &gy, &gw}), conv_flops(plan.g)}; });
  require_kernel(kernels.weight_grad, input.device(), op)(current_context(),
                                                          {plan.g, x.data_ptr(), gy.data_ptr(), gw.data_ptr()});
  return logical_result(gw, cl, input.dtype());
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward(const Tensor& grad_output, const Tensor& input,
                                                        const Tensor& weight, const std::vector<int64_t>& stride,
                                                        const std::vector<int64_t>& padding,
                                                        const std::vector<int64_t>& dilation, bool transposed,
                                                        const std::vector<int64_t>& output_padding, int64_t groups,
                                                        std::array<bool, 3> output_mask) {
  constexpr const char* op = "convolution_backward";
  check_defined(grad_output, op, "grad_output");
  const Plan plan =
      plan_convolution(op, input, weight, std::nullopt, stride, padding, dilation, transposed, output_padding, groups);
  KILN_CHECK(grad_output.sizes() == plan.out_sizes, op,
             "grad_output of size {} does not match the convolution's output size {}", grad_output.shape_str(),
             list_str(plan.out_sizes));
  // The gradients keep the layout the forward computed in.
  const bool cl = plan.spatial >= 2 && (channels_last_strides(input) || channels_last_strides(weight));
  const Tensor g = cl ? as_channels_last(grad_output) : grad_output;
  const int64_t spatial = plan.spatial;
  const ConvParams p = expand_params(op, spatial, stride, padding, dilation, transposed, output_padding, groups);
  Tensor grad_input, grad_weight, grad_bias;
  if (!transposed) {
    if (output_mask[0]) {
      // The output_padding that gives back the input's size: (in + 2p - span) mod stride.
      std::vector<int64_t> restore(static_cast<size_t>(spatial));
      for (int64_t i = 0; i < spatial; ++i) {
        const int64_t span = p.dilation[i] * (weight.size(2 + i) - 1) + 1;
        restore[i] = (input.size(2 + i) + 2 * p.padding[i] - span) % p.stride[i];
      }
      grad_input = convolution(g, weight, std::nullopt, p.stride, p.padding, p.dilation, true, restore, groups);
    }
    if (output_mask[1])
      grad_weight = convolution_weight_grad(input, g, weight.sizes(), p.stride, p.padding, p.dilation, groups);
  } else {
    if (output_mask[0]) {
      grad_input = convolution(g, weight, std::nullopt, p.stride, p.padding, p.dilation, false, {0}, groups);
      // output_padding >= stride (allowed when below dilation) leaves trailing outputs
      // no input position maps to.
      for (int64_t i = 0; i < spatial; ++i)
        if (grad_input.size(2 + i) != input.size(2 + i)) grad_input = grad_input.narrow(2 + i, 0, input.size(2 + i));
    }
    if (output_mask[1])
      grad_weight = convolution_weight_grad(g, input, weight.sizes(), p.stride, p.padding, p.dilation, groups);
  }
  // Each gradient in its tensor's own layout, as PyTorch's leaves get them.
  const auto like = [&](const Tensor& grad, const Tensor& t) {
    if (!grad.defined() || spatial < 2) return grad;
    return channels_last_strides(t) ? as_channels_last(grad) : grad.contiguous();
  };
  grad_input = like(grad_input, input);
  grad_weight = like(grad_weight, weight);
  if (output_mask[2]) {
    DimList dims{0};
    for (int64_t i = 0; i < spatial; ++i) dims.push_back(2 + i);
    grad_bias = sum(g, dims);
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace kiln
