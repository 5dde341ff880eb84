// kiln.composite: the unfused definitions of the fused ops (include/kiln/ops/composite.h),
// with the fused ops' Python signatures.
#include "binding_helpers.h"
#include "kiln/ops/composite.h"

namespace kiln::python {

void bind_composite(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "composite", "Unfused composites of the fused ops, built from simpler kiln ops: slow, readable references");
  m.def("silu_and_mul", &composite::silu_and_mul, py::arg("input"));
  m.def("rms_norm", [](const Tensor& t, const py::object& shape, std::optional<Tensor> weight,
                       std::optional<double> eps) { return composite::rms_norm(t, to_shape(shape), weight, eps); },
        py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("eps") = py::none());
  m.def("rms_norm_llama", &composite::rms_norm_llama, py::arg("input"), py::arg("weight"), py::arg("eps"));
  m.def("rms_norm_one_plus", &composite::rms_norm_one_plus, py::arg("input"), py::arg("weight"), py::arg("eps"));
  m.def("rms_norm_gated", &composite::rms_norm_gated, py::arg("input"), py::arg("gate"), py::arg("weight"),
        py::arg("eps"));
  m.def("layer_norm", [](const Tensor& t, const py::object& shape, std::optional<Tensor> weight,
                         std::optional<Tensor> bias, double eps) {
    return composite::layer_norm(t, to_shape(shape), weight, bias, eps);
  }, py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
        py::arg("eps") = 1e-5);
  m.def("linear_fp8", &composite::linear_fp8, py::arg("input"), py::arg("weight"), py::arg("scale"),
        py::arg("bias") = py::none());
  m.def("scaled_dot_product_attention", &composite::scaled_dot_product_attention, py::arg("query"), py::arg("key"),
        py::arg("value"), py::arg("attn_mask") = py::none(), py::arg("dropout_p") = 0.0, py::arg("is_causal") = false,
        py::kw_only(), py::arg("scale") = py::none(), py::arg("enable_gqa") = false);
  m.def("attention_decode", &composite::attention_decode, py::arg("q"), py::arg("k_cache"), py::arg("v_cache"),
        py::arg("valid_len"), py::arg("scale") = py::none());
  // The routed experts in Hugging Face's fused layout, as kiln.moe_experts takes them
  // (no shared expert here).
  m.def("moe_experts", [](const Tensor& x, const Tensor& weights, const Tensor& ids, const Tensor& gate_up_proj,
                          const Tensor& down_proj, std::optional<Tensor> gate_up_scale,
                          std::optional<Tensor> down_scale) {
    return composite::moe_experts(x, weights, ids,
                                  MoeExperts::from_fused(gate_up_proj, down_proj, gate_up_scale, down_scale));
  }, py::arg("x"), py::arg("weights"), py::arg("ids"), py::arg("gate_up_proj"), py::arg("down_proj"), py::kw_only(),
        py::arg("gate_up_scale") = py::none(), py::arg("down_scale") = py::none());
  m.def("causal_conv1d", [](const Tensor& x, const Tensor& weight, Tensor conv_state, const std::string& activation) {
    return composite::causal_conv1d(x, weight, conv_state, activation);
  }, py::arg("x"), py::arg("weight"), py::arg("conv_state"), py::arg("activation") = "silu");
  m.def("gated_delta_rule", [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                               Tensor state, bool use_qk_l2norm_in_kernel, std::optional<double> scale) {
    return composite::gated_delta_rule(q, k, v, g, beta, state, use_qk_l2norm_in_kernel, scale);
  }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("g"), py::arg("beta"), py::arg("state"),
        py::arg("use_qk_l2norm_in_kernel") = true, py::arg("scale") = py::none());
}

}  // namespace kiln::python
