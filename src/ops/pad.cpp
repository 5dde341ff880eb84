// torch.nn.functional.pad (kiln/ops/pad.h): the constant mode is one pass of the pad
// family's kernel (backend/pad.h) over a preallocated output; the other modes gather
// along each padded dim with index_select.
#include "kiln/ops/pad.h"

#include <string>

#include "backend/pad.h"
#include "core/memory_format.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/index.h"
#include "ops/autograd_hooks.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

enum class PadMode { Reflect, Replicate, Circular };

std::string pad_str(const std::vector<int64_t>& pad) { return shape_to_string(Shape(pad.begin(), pad.end())); }

// The output size of `dim` padded by (left, right), checked.
int64_t padded_size(const Tensor& input, int64_t dim, int64_t left, int64_t right) {
  int64_t size = 0;
  KILN_CHECK(checked_add(input.size(dim), left, &size) && checked_add(size, right, &size), "pad",
             "padding ({}, {}) of dimension {} (size {}) overflows int64", left, right, dim, input.size(dim));
  return size;
}

// Source index of every output position along one dim.
Tensor source_indices(PadMode mode, int64_t n, int64_t left, int64_t out) {
  Tensor idx = Tensor::empty({out}, DType::Int64, kCPU, "pad");
  int64_t* p = idx.data<int64_t>();
  for (int64_t j = 0; j < out; ++j) {
    int64_t s = j - left;
    switch (mode) {
      case PadMode::Reflect: s = s < 0 ? -s : (s >= n ? 2 * (n - 1) - s : s); break;
      case PadMode::Replicate: s = s < 0 ? 0 : (s >= n ? n - 1 : s); break;
      case PadMode::Circular: s = ((s % n) + n) % n; break;
    }
    p[j] = s;
  }
  return idx;
}

Tensor constant_pad(const Tensor& input, const std::vector<int64_t>& pad, double value) {
  KILN_AUTOGRAD(constant_pad, input, pad, value);
  const int64_t k = static_cast<int64_t>(pad.size()) / 2;
  const int64_t ndim = input.dim();
  KILN_CHECK(ndim <= backend::kMaxPadDims, "pad", "inputs of more than {} dims are not supported (got {})",
             backend::kMaxPadDims, input.shape_str());
  Shape out_sizes = input.sizes();
  Shape begin(ndim, 0);
  Tensor src = input;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = ndim - 1 - i;
    const int64_t left = pad[2 * i], right = pad[2 * i + 1];
    const int64_t out = padded_size(input, d, left, right);
    KILN_CHECK(out >= 0, "pad",
               "The input size {}, plus negative padding {} and {} resulted in a negative output size, which is "
               "invalid. Check dimension {} of your input.", input.size(d), left, right, d);
    out_sizes[d] = out;
    // Negative pads crop the source; positive ones offset it in the output.
    const int64_t src_start = std::min<int64_t>(std::max<int64_t>(-left, 0), input.size(d));
    const int64_t src_end = std::max<int64_t>(src_start, input.size(d) - std::max<int64_t>(-right, 0));
    src = src.narrow(d, src_start, src_end - src_start);
    begin[d] = std::max<int64_t>(left, 0);
  }
  // PyTorch's constant_pad_nd keeps a channels-last input channels-last.
  Tensor out = Tensor::empty(out_sizes, input.dtype(), input.device(), input.suggest_memory_format(), "pad");
  if (out.numel() == 0) return out;
  const auto kernel = backend::pad_kernels.on(input.device(), "pad").constant;
  const Tensor fill = Tensor::from_scalar(Scalar(value)).to(input.dtype());
  // The kernel writes a row-major output: walk the dims in the output's memory order.
  const Shape order = dims_by_memory_order(out);
  backend::ConstantPadProblem p{};
  p.itemsize = input.element_size();
  p.ndim = static_cast<int>(ndim);
  for (int64_t j = 0; j < ndim; ++j) {
    const int64_t d = order[j];
    p.out_sizes[j] = out_sizes[d];
    p.begin[j] = begin[d];
    p.length[j] = src.size(d);
    p.in_strides[j] = src.stride(d);
  }
  // Scalar dims: a 0-dim tensor is one row of one element.
  if (ndim == 0) {
    p.ndim = 1;
    p.out_sizes[0] = p.length[0] = 1;
    p.in_strides[0] = 1;
  }
  p.in = src.numel() > 0 ? src.data_ptr() : input.data_ptr();
  p.out = out.data_ptr();
  p.fill = fill.data_ptr();
  const OpProfile profile("pad", [&] { return OpCost{tensor_bytes({&src, &out}), 0}; });
  kernel(current_context(), p);
  return out;
}

}  // namespace

Tensor pad(const Tensor& input, const std::vector<int64_t>& pad, std::string_view mode, std::optional<double> value) {
  check_defined(input, "pad", "input");
  KILN_CHECK(pad.size() % 2 == 0, "pad", "Padding length must be divisible by 2, got {}", pad_str(pad));
  const int64_t k = static_cast<int64_t>(pad.size()) / 2;
  KILN_CHECK(k <= input.dim(), "pad", "Padding length should be less than or equal to two times the input dimension "
             "but got padding length {} and input of dimension {}", pad.size(), input.dim());
  if (mode == "constant") return constant_pad(input, pad, value.value_or(0.0));

  PadMode m;
  if (mode == "reflect") {
    m = PadMode::Reflect;
  } else if (mode == "replicate") {
    m = PadMode::Replicate;
  } else if (mode == "circular") {
    m = PadMode::Circular;
  } else {
    fail(ErrorKind::Value, "pad", "Unrecognised padding mode {} (expected constant, reflect, replicate or circular)",
         mode);
  }
  KILN_CHECK_KIND(!value.has_value() || *value == 0.0, Value, "pad",
                  "Padding mode \"{}\" doesn't take in value argument", mode);
  KILN_CHECK(k >= 1 && k <= 3 && (input.dim() == k + 1 || input.dim() == k + 2), "pad",
             "{} padding of {} dims expects a {}-D or {}-D (batch mode) input, got an input of size {}", mode, k,
             k + 1, k + 2, input.shape_str());
  Tensor out = input;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = input.dim() - 1 - i;
    const int64_t n = input.size(d), left = pad[2 * i], right = pad[2 * i + 1];
    if (m == PadMode::Reflect) {
      KILN_CHECK(left < n && right < n, "pad",
                 "Argument #4: Padding size should be less than the corresponding input dimension, but got: padding "
                 "({}, {}) at dimension {} of input {}", left, right, d, input.shape_str());
    } else if (m == PadMode::Circular) {
      KILN_CHECK(left <= n && right <= n, "pad",
                 "Padding value causes wrapping around more than once (padding ({}, {}) at dimension {} of input {})",
                 left, right, d, input.shape_str());
    }
    const int64_t size = padded_size(input, d, left, right);
    KILN_CHECK(size >= 1 && n >= 1, "pad", "input (size {} at dimension {}) is too small. Calculated output size: {}", n,
               d, size);
    // The index lives where the input does (a device input gathers there).
    out = index_select(out, d, source_indices(m, n, left, size).to(input.device()));
  }
  return out;
}

}  // namespace kiln
