// Convolutions: kiln.conv1d/2d/3d, conv_transpose1d/2d/3d (also kiln.nn.functional.*)
// and kiln.convolution_backward (torch.ops.aten.convolution_backward's arguments).
#include <pybind11/stl.h>

#include "bindings.h"
#include "kiln/ops/conv.h"

namespace kiln::python {

namespace {

// An int or a sequence of ints (stride=2, stride=(2, 1)).
std::vector<int64_t> int_list(const py::object& o, std::string_view op, std::string_view what) {
  if (py::isinstance<py::str>(o)) throw py::type_error(std::string(op) + ": " + std::string(what) + " must be an int or a tuple of ints");
  if (PyIndex_Check(o.ptr())) return {to_int64(o, op, what)};
  return to_shape(o, op, what);
}

ConvPadding conv_padding(const py::object& o, std::string_view op) {
  if (py::isinstance<py::str>(o)) return ConvPadding(o.cast<std::string>());
  return ConvPadding(int_list(o, op, "padding"));
}

using ConvFn = Tensor (*)(const Tensor&, const Tensor&, const std::optional<Tensor>&, const std::vector<int64_t>&,
                          const ConvPadding&, const std::vector<int64_t>&, int64_t);
using ConvTransposeFn = Tensor (*)(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                   const std::vector<int64_t>&, const std::vector<int64_t>&,
                                   const std::vector<int64_t>&, int64_t, const std::vector<int64_t>&);

}  // namespace

void bind_conv(py::module_& m) {
  for (const auto& [name, fn] :
       {std::pair<const char*, ConvFn>{"conv1d", &conv1d}, {"conv2d", &conv2d}, {"conv3d", &conv3d}}) {
    m.def(
        name,
        [fn, name = name](const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                          const py::object& stride, const py::object& padding, const py::object& dilation,
                          int64_t groups) {
          return fn(input, weight, bias, int_list(stride, name, "stride"), conv_padding(padding, name),
                    int_list(dilation, name, "dilation"), groups);
        },
        py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
        py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1);
  }
  for (const auto& [name, fn] : {std::pair<const char*, ConvTransposeFn>{"conv_transpose1d", &conv_transpose1d},
                                 {"conv_transpose2d", &conv_transpose2d},
                                 {"conv_transpose3d", &conv_transpose3d}}) {
    m.def(
        name,
        [fn, name = name](const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                          const py::object& stride, const py::object& padding, const py::object& output_padding,
                          int64_t groups, const py::object& dilation) {
          return fn(input, weight, bias, int_list(stride, name, "stride"), int_list(padding, name, "padding"),
                    int_list(output_padding, name, "output_padding"), groups, int_list(dilation, name, "dilation"));
        },
        py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
        py::arg("padding") = 0, py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("dilation") = 1);
  }
  m.def(
      "convolution_backward",
      [](const Tensor& grad_output, const Tensor& input, const Tensor& weight, const py::object& /*bias_sizes*/,
         const py::object& stride, const py::object& padding, const py::object& dilation, bool transposed,
         const py::object& output_padding, int64_t groups, const std::array<bool, 3>& output_mask) {
        constexpr const char* op = "convolution_backward";
        auto [gi, gw, gb] = convolution_backward(grad_output, input, weight, int_list(stride, op, "stride"),
                                                 int_list(padding, op, "padding"), int_list(dilation, op, "dilation"),
                                                 transposed, int_list(output_padding, op, "output_padding"), groups,
                                                 output_mask);
        const auto maybe = [](const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); };
        return py::make_tuple(maybe(gi), maybe(gw), maybe(gb));
      },
      py::arg("grad_output"), py::arg("input"), py::arg("weight"), py::arg("bias_sizes") = py::none(),
      py::arg("stride") = 1, py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("transposed") = false,
      py::arg("output_padding") = 0, py::arg("groups") = 1,
      py::arg("output_mask") = std::array<bool, 3>{true, true, true});
}

}  // namespace kiln::python
