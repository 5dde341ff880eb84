// Gated DeltaNet ops: kiln.causal_conv1d, kiln.gated_delta_gates, kiln.gated_delta_rule,
// kiln.gated_delta_rule_chunked.
// The state tensors are updated in place, as the C++ ops do.
#include "binding_helpers.h"
#include "kiln/ops/gated_delta.h"

namespace kiln::python {

void bind_gated_delta(py::module_& m) {
  m.def("causal_conv1d", [](const Tensor& x, const Tensor& weight, Tensor conv_state, const std::string& activation) {
    return causal_conv1d(x, weight, conv_state, activation);
  }, py::arg("x"), py::arg("weight"), py::arg("conv_state"), py::arg("activation") = "silu");
  m.def("gated_delta_gates", [](const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias) {
    DeltaGates gates = gated_delta_gates(a, b, A_log, dt_bias);
    return py::make_tuple(gates.g, gates.beta);
  }, py::arg("a"), py::arg("b"), py::arg("A_log"), py::arg("dt_bias"));
  m.def("gated_delta_rule", [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                               Tensor state, bool use_qk_l2norm_in_kernel, std::optional<double> scale) {
    return gated_delta_rule(q, k, v, g, beta, state, use_qk_l2norm_in_kernel, scale);
  }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("g"), py::arg("beta"), py::arg("state"),
        py::arg("use_qk_l2norm_in_kernel") = true, py::arg("scale") = py::none());
  m.def("gated_delta_rule_chunked", [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                       const Tensor& beta, Tensor state, bool use_qk_l2norm_in_kernel,
                                       std::optional<double> scale, int64_t chunk_size) {
    return gated_delta_rule_chunked(q, k, v, g, beta, state, use_qk_l2norm_in_kernel, scale, chunk_size);
  }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("g"), py::arg("beta"), py::arg("state"),
        py::arg("use_qk_l2norm_in_kernel") = true, py::arg("scale") = py::none(),
        py::arg("chunk_size") = kMaxDeltaChunkSize);
}

}  // namespace kiln::python
