// kiln.cross_entropy / kiln.mse_loss (also kiln.nn.functional.*).
#include <pybind11/stl.h>

#include "bindings.h"
#include "kiln/ops/loss.h"

namespace kiln::python {

void bind_loss(py::module_& m) {
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
