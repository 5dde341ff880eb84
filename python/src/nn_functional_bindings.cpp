// Losses, pad, dropout and group_norm: kiln.cross_entropy, mse_loss, pad, dropout, group_norm
// (also kiln.nn.functional.*).
#include <pybind11/stl.h>

#include "bindings.h"
#include "kiln/ops/dropout.h"
#include "kiln/ops/group_norm.h"
#include "kiln/ops/interpolate.h"
#include "kiln/ops/loss.h"
#include "kiln/ops/pad.h"

namespace kiln::python {

void bind_nn_functional(py::module_& m) {
  m.def(
      "interpolate",
      [](const Tensor& input, const py::object& size, const py::object& scale_factor, const std::string& mode,
         std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor) {
        std::vector<int64_t> sizes;
        std::vector<double> factors;
        if (!size.is_none()) sizes = py::isinstance<py::int_>(size) ? std::vector<int64_t>{size.cast<int64_t>()}
                                                                    : size.cast<std::vector<int64_t>>();
        if (!scale_factor.is_none()) {
          factors = py::isinstance<py::float_>(scale_factor) || py::isinstance<py::int_>(scale_factor)
                        ? std::vector<double>{scale_factor.cast<double>()}
                        : scale_factor.cast<std::vector<double>>();
        }
        return interpolate(input, sizes, factors, mode, align_corners, recompute_scale_factor.value_or(false));
      },
      py::arg("input"), py::arg("size") = py::none(), py::arg("scale_factor") = py::none(),
      py::arg("mode") = "nearest", py::arg("align_corners") = py::none(),
      py::arg("recompute_scale_factor") = py::none());
  m.def(
      "group_norm",
      [](const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight,
         const std::optional<Tensor>& bias, double eps) { return group_norm(input, num_groups, weight, bias, eps); },
      py::arg("input"), py::arg("num_groups"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
      py::arg("eps") = 1e-5);
  using DropoutFn = Tensor (*)(const Tensor&, double, bool, Generator*);
  for (const auto& [name, fn] : {std::pair<const char*, DropoutFn>{"dropout", &dropout}, {"dropout2d", &dropout2d}}) {
    m.def(
        name,
        [fn](const Tensor& input, double p, bool training, bool inplace, const py::object& generator) {
          Generator* gen = generator.is_none() ? nullptr : generator.cast<Generator*>();
          Tensor out = fn(input, p, training, gen);
          if (!inplace || out.is_same(input)) return out;
          Tensor self = input;
          self.copy_(out);
          return self;
        },
        py::arg("input"), py::arg("p") = 0.5, py::arg("training") = true, py::arg("inplace") = false,
        py::kw_only(), py::arg("generator") = py::none());
  }
  m.def(
      "pad",
      [](const Tensor& input, const std::vector<int64_t>& pad_sizes, const std::string& mode,
         std::optional<double> value) { return pad(input, pad_sizes, mode, value); },
      py::arg("input"), py::arg("pad"), py::arg("mode") = "constant", py::arg("value") = py::none());
  m.def(
      "cross_entropy",
      [](const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight, int64_t ignore_index,
         const std::string& reduction, double label_smoothing) {
        return cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing);
      },
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
      py::arg("reduction") = "mean", py::arg("label_smoothing") = 0.0);
  m.def(
      "mse_loss",
      [](const Tensor& input, const Tensor& target, const std::string& reduction) {
        return mse_loss(input, target, reduction);
      },
      py::arg("input"), py::arg("target"), py::arg("reduction") = "mean");
}

}  // namespace kiln::python
