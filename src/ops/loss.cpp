// Loss functions built from public ops (kiln/ops/loss.h); autograd records the parts.
#include "kiln/ops/loss.h"

#include <string>

#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

enum class Reduction { None, Mean, Sum };

Reduction parse_reduction(const char* op, std::string_view r) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  fail(ErrorKind::Value, op, "{} is not a valid value for reduction (expected 'none', 'mean' or 'sum')", r);
}

// The per-class weights viewed to broadcast along the class dim of `input`.
Tensor class_weights_along(const Tensor& weight, int64_t ndim, int64_t class_dim) {
  Shape shape(ndim, 1);
  shape[class_dim] = weight.size(0);
  return weight.view(shape);
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                     int64_t ignore_index, std::string_view reduction, double label_smoothing) {
  constexpr const char* op = "cross_entropy";
  check_defined(input, op, "input");
  check_defined(target, op, "target");
  const Reduction red = parse_reduction(op, reduction);
  KILN_CHECK_KIND(label_smoothing >= 0.0 && label_smoothing <= 1.0, Value, op,
                  "label_smoothing must be between 0.0 and 1.0. Got: {}", label_smoothing);
  KILN_CHECK(input.dim() >= 1, op, "input must have at least 1 dim (the classes), got a 0-dim tensor");
  KILN_CHECK_KIND(is_floating(input.dtype()), Type, op, "expected a floating-point input, got {}",
                  dtype_name(input.dtype()));
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const int64_t C = input.size(class_dim);
  if (weight) {
    KILN_CHECK(weight->dim() == 1 && weight->size(0) == C, op,
               "weight tensor should be defined either for all {} classes or no classes but got weight tensor of "
               "shape: {}", C, weight->shape_str());
  }
  const Tensor logp = log_softmax(input, class_dim);
  const double s = label_smoothing;

  if (is_floating(target.dtype())) {
    // Class probabilities.
    KILN_CHECK(target.sizes() == input.sizes(), op,
               "Expected target size {} (class probabilities of the input's shape), got {}", input.shape_str(),
               target.shape_str());
    Tensor t = s > 0 ? add(mul(target, Scalar(1.0 - s)), Scalar(s / static_cast<double>(C))) : target;
    Tensor terms = mul(logp, t);
    if (weight) terms = mul(terms, class_weights_along(*weight, input.dim(), class_dim));
    Tensor per_row = neg(sum(terms, {class_dim}));
    if (red == Reduction::None) return per_row;
    Tensor total = sum(per_row);
    return red == Reduction::Sum ? total : div(total, Scalar(static_cast<double>(input.numel() / std::max<int64_t>(C, 1))));
  }

  KILN_CHECK_KIND(target.dtype() == DType::Int64 || target.dtype() == DType::Int32, Type, op,
                  "expected target of class indices (int64 or int32) or class probabilities (float), got {}",
                  dtype_name(target.dtype()));
  Shape expected = input.sizes();
  expected.erase(expected.begin() + class_dim);
  KILN_CHECK(target.sizes() == expected, op, "Expected target size {}, got {}", shape_to_string(expected),
             target.shape_str());
  const Tensor ignored = eq(target, Scalar(ignore_index));
  const Tensor safe_target = where(ignored, Scalar(int64_t{0}), target.to(DType::Int64));
  if (safe_target.numel() > 0) {
    // Both bounds come to the host in one read (one wait on a device).
    const Tensor bounds = cat({amin(safe_target).reshape({1}), amax(safe_target).reshape({1})}, 0).to(kCPU);
    const int64_t lo = bounds.data<int64_t>()[0], hi = bounds.data<int64_t>()[1];
    KILN_CHECK_KIND(lo >= 0 && hi < C, Index, op, "Target {} is out of bounds.", lo < 0 ? lo : hi);
  }
  // -log p[target] per position, weighted; ignored positions weigh 0.
  const Tensor picked = gather(logp, class_dim, safe_target.unsqueeze(class_dim)).squeeze(class_dim);
  Tensor w = weight ? index_select(*weight, 0, safe_target.reshape({-1})).view(safe_target.sizes())
                    : ones(safe_target.sizes(), input.dtype());
  w = where(ignored, Scalar(0.0), w);
  Tensor nll = neg(mul(picked, w));
  Tensor smooth;
  if (s > 0) {
    Tensor terms = weight ? mul(logp, class_weights_along(*weight, input.dim(), class_dim)) : logp;
    smooth = where(ignored, Scalar(0.0), neg(sum(terms, {class_dim})));
  }
  const auto combine = [&](const Tensor& n, const Tensor& sm) {
    if (s == 0) return n;
    return add(mul(n, Scalar(1.0 - s)), mul(sm, Scalar(s / static_cast<double>(C))));
  };
  if (red == Reduction::None) return combine(nll, smooth);
  if (red == Reduction::Sum) return combine(sum(nll), s > 0 ? sum(smooth) : Tensor());
  // Mean: over the summed weights of the counted targets (nll_loss's rule; the smoothing
  // term is normalised the same way, as PyTorch does).
  Tensor denom = sum(w);
  return combine(div(sum(nll), denom), s > 0 ? div(sum(smooth), denom) : Tensor());
}

Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction) {
  constexpr const char* op = "mse_loss";
  check_defined(input, op, "input");
  check_defined(target, op, "target");
  const Reduction red = parse_reduction(op, reduction);
  Tensor sq = square(sub(input, target));
  if (red == Reduction::None) return sq;
  return red == Reduction::Sum ? sum(sq) : mean(sq);
}

}  // namespace kiln
