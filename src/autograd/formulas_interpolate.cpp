// Backward formulas of interpolate and of its adjoint. Both are linear maps, each the
// other's transpose, so the gradient of one is the other applied to the incoming
// gradient, and double backward holds to any order.
#include <string>

#include "autograd/function.h"
#include "kiln/ops/interpolate.h"
#include "ops/autograd_hooks.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;
using C = BackwardContext;

// PyTorch's node names (UpsampleNearest2DBackward0, UpsampleBilinear2DBackward0, ...).
const char* node_name(std::string_view mode, size_t rank, bool of_backward) {
  static const char* const kForward[3][3] = {
      {"UpsampleNearest1DBackward0", "UpsampleNearest2DBackward0", "UpsampleNearest3DBackward0"},
      {"_UpsampleNearestExact1DBackward0", "_UpsampleNearestExact2DBackward0", "_UpsampleNearestExact3DBackward0"},
      {"UpsampleLinear1DBackward0", "UpsampleBilinear2DBackward0", "UpsampleTrilinear3DBackward0"}};
  static const char* const kBackward[3][3] = {
      {"UpsampleNearest1DBackwardBackward0", "UpsampleNearest2DBackwardBackward0", "UpsampleNearest3DBackwardBackward0"},
      {"_UpsampleNearestExact1DBackwardBackward0", "_UpsampleNearestExact2DBackwardBackward0",
       "_UpsampleNearestExact3DBackwardBackward0"},
      {"UpsampleLinear1DBackwardBackward0", "UpsampleBilinear2DBackwardBackward0",
       "UpsampleTrilinear3DBackwardBackward0"}};
  const int m = mode == "nearest" ? 0 : mode == "nearest-exact" ? 1 : 2;
  const size_t spatial = rank >= 3 && rank <= 5 ? rank - 3 : 0;  // the forward has validated the rank
  return of_backward ? kBackward[m][spatial] : kForward[m][spatial];
}

// The arguments both directions share, kept by the recorded nodes.
struct Resize {
  std::vector<int64_t> size;
  std::vector<double> scale_factor;
  std::string mode;
  std::optional<bool> align_corners;
  bool recompute_scale_factor;
};

Tensor interpolate_entry(const Tensor& x, const std::vector<int64_t>& size, const std::vector<double>& scale_factor,
                         std::string_view mode, std::optional<bool> align_corners, bool recompute_scale_factor) {
  Tensor y = below_autograd(
      [&] { return interpolate(x, size, scale_factor, mode, align_corners, recompute_scale_factor); });
  const Resize r{size, scale_factor, std::string(mode), align_corners, recompute_scale_factor};
  return record(node_name(mode, x.sizes().size(), false), {x}, y, {}, [r, in_sizes = x.sizes()](C& c) {
    return Grads{interpolate_backward(c.grad(), in_sizes, r.size, r.scale_factor, r.mode, r.align_corners,
                                      r.recompute_scale_factor)};
  });
}

Tensor interpolate_backward_entry(const Tensor& g, const Shape& input_sizes, const std::vector<int64_t>& size,
                                  const std::vector<double>& scale_factor, std::string_view mode,
                                  std::optional<bool> align_corners, bool recompute_scale_factor) {
  Tensor y = below_autograd([&] {
    return interpolate_backward(g, input_sizes, size, scale_factor, mode, align_corners, recompute_scale_factor);
  });
  const Resize r{size, scale_factor, std::string(mode), align_corners, recompute_scale_factor};
  return record(node_name(mode, input_sizes.size(), true), {g}, y, {}, [r](C& c) {
    return Grads{interpolate(c.grad(), r.size, r.scale_factor, r.mode, r.align_corners, r.recompute_scale_factor)};
  });
}

const bool installed = [] {
  auto& h = autograd_hooks::op_hooks();
  h.interpolate = interpolate_entry;
  h.interpolate_backward = interpolate_backward_entry;
  return true;
}();

}  // namespace

}  // namespace kiln::autograd
