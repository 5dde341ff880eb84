// Softmax, normalisations, rotary embeddings and fused activations.
#include "binding_helpers.h"
#include "kiln/ops/nn.h"

namespace kiln::python {

void bind_nn(py::module_& m) {
  def_op(m, "softmax", [](const Tensor& t, int64_t dim, const py::object& dtype) {
    return softmax(t, dim, to_opt_dtype(dtype));
  }, py::arg("input"), py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
  def_op(m, "log_softmax", [](const Tensor& t, int64_t dim, const py::object& dtype) {
    return log_softmax(t, dim, to_opt_dtype(dtype));
  }, py::arg("input"), py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("rms_norm", [](const Tensor& t, const py::object& shape, std::optional<Tensor> weight, std::optional<double> eps) {
    return rms_norm(t, to_shape(shape), weight, eps);
  }, py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("eps") = py::none());
  m.def("layer_norm", [](const Tensor& t, const py::object& shape, std::optional<Tensor> weight, std::optional<Tensor> bias,
                         double eps) { return layer_norm(t, to_shape(shape), weight, bias, eps); },
        py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
        py::arg("eps") = 1e-5);
  m.def("rms_norm_llama", &rms_norm_llama, py::arg("input"), py::arg("weight"), py::arg("eps"));
  m.def("rms_norm_one_plus", &rms_norm_one_plus, py::arg("input"), py::arg("weight"), py::arg("eps"));
  m.def("rms_norm_gated", &rms_norm_gated, py::arg("input"), py::arg("gate"), py::arg("weight"), py::arg("eps"));
  m.def("rope_inv_freq", &rope_inv_freq, py::arg("rotary_dim"), py::arg("rope_theta"));
  m.def("rope_cos_sin", [](const Tensor& positions, int64_t rotary_dim, double theta, DType dtype) {
    RopeTables t = rope_cos_sin(positions, rotary_dim, theta, dtype);
    return py::make_tuple(t.cos, t.sin);
  }, py::arg("positions"), py::arg("rotary_dim"), py::arg("rope_theta"), py::arg("dtype") = DType::Float32);
  m.def("apply_rotary_emb", &apply_rotary_emb, py::arg("x"), py::arg("positions"), py::arg("rope_theta"),
        py::arg("rotary_dim") = py::none(), py::arg("interleaved") = false);
  m.def("apply_rotary_emb_cos_sin", &apply_rotary_emb_cos_sin, py::arg("x"), py::arg("cos"), py::arg("sin"),
        py::arg("interleaved") = false);
  m.def("silu_and_mul", &silu_and_mul, py::arg("input"));
}

}  // namespace kiln::python
