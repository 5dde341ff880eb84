// Attention, scaled (FP8) matmul and grouped matmul.
#include "binding_helpers.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/grouped_mm.h"
#include "kiln/ops/moe.h"
#include "kiln/ops/scaled_mm.h"

namespace kiln::python {

void bind_matmul_family(py::module_& m) {
  m.def("scaled_dot_product_attention", &scaled_dot_product_attention, py::arg("query"), py::arg("key"),
        py::arg("value"), py::arg("attn_mask") = py::none(), py::arg("dropout_p") = 0.0, py::arg("is_causal") = false,
        py::kw_only(), py::arg("scale") = py::none(), py::arg("enable_gqa") = false);
  m.def("attention_decode", &attention_decode, py::arg("q"), py::arg("k_cache"), py::arg("v_cache"),
        py::arg("valid_len"), py::arg("scale") = py::none(),
        "kiln's decode attention: q [B, Hq, E] against the first valid_len cache positions");

  py::enum_<ScalingType>(m, "ScalingType")
      .value("TensorWise", ScalingType::TensorWise)
      .value("RowWise", ScalingType::RowWise)
      .value("BlockWise1x16", ScalingType::BlockWise1x16)
      .value("BlockWise1x32", ScalingType::BlockWise1x32)
      .value("BlockWise1x128", ScalingType::BlockWise1x128)
      .value("BlockWise128x128", ScalingType::BlockWise128x128);
  m.def("scaled_mm", [](const Tensor& a, const Tensor& b, const Tensor& scale_a, ScalingType recipe_a,
                        const Tensor& scale_b, ScalingType recipe_b, const py::object& swizzle_a,
                        const py::object& swizzle_b, std::optional<Tensor> bias, const py::object& output_dtype,
                        const py::object& contraction_dim, bool /*use_fast_accum: f32 accumulation always*/) {
    if (!swizzle_a.is_none() || !swizzle_b.is_none()) {
      throw py::value_error("scaled_mm: swizzled scales are not supported on CPU");
    }
    if (!contraction_dim.is_none() && py::len(contraction_dim) != 0) {
      Shape cd = to_shape(contraction_dim);
      if (cd != Shape{1, 0}) throw py::value_error("scaled_mm: contraction_dim must be () or (1, 0)");
    }
    DType out = output_dtype.is_none() ? DType::BFloat16 : to_dtype(output_dtype);
    return scaled_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, bias, out);
  }, py::arg("mat_a"), py::arg("mat_b"), py::arg("scale_a"), py::arg("scale_recipe_a"), py::arg("scale_b"),
        py::arg("scale_recipe_b"), py::arg("swizzle_a") = py::none(), py::arg("swizzle_b") = py::none(),
        py::arg("bias") = py::none(), py::arg("output_dtype") = py::none(), py::arg("contraction_dim") = py::tuple(),
        py::arg("use_fast_accum") = false);
  m.def("_scaled_mm", [](const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                         std::optional<Tensor> bias, std::optional<Tensor> scale_result, const py::object& out_dtype,
                         bool /*use_fast_accum*/) {
    return _scaled_mm(a, b, scale_a, scale_b, bias, scale_result, to_opt_dtype(out_dtype));
  }, py::arg("mat1"), py::arg("mat2"), py::arg("scale_a"), py::arg("scale_b"), py::arg("bias") = py::none(),
        py::arg("scale_result") = py::none(), py::arg("out_dtype") = py::none(), py::arg("use_fast_accum") = false);

  m.def("grouped_mm", [](const Tensor& a, const Tensor& b, std::optional<Tensor> offs, std::optional<Tensor> bias,
                         const py::object& out_dtype) { return grouped_mm(a, b, offs, bias, to_opt_dtype(out_dtype)); },
        py::arg("mat_a"), py::arg("mat_b"), py::kw_only(), py::arg("offs") = py::none(), py::arg("bias") = py::none(),
        py::arg("out_dtype") = py::none());
  m.attr("_grouped_mm") = m.attr("grouped_mm");
  m.def("grouped_mm_fp8", &grouped_mm_fp8, py::arg("mat_a"), py::arg("mat_b"), py::arg("scale"), py::arg("offs"),
        "kiln's FP8 experts: mat_b float8_e4m3fn [G, N, K], per-row scale float32 [G, N]");

  // MoE routing and the fused expert block (kiln's own; see include/kiln/ops/moe.h).
  m.def("moe_route", [](const Tensor& logits, int64_t top_k, const std::string& scoring, bool renormalize,
                        std::optional<Tensor> selection_bias, double routed_scaling_factor, double renorm_eps) {
    if (scoring != "softmax" && scoring != "sigmoid") {
      throw py::value_error("moe_route: scoring must be 'softmax' or 'sigmoid', got '" + scoring + "'");
    }
    const MoeRouting r = moe_route(logits, top_k, scoring == "softmax" ? MoeScoring::Softmax : MoeScoring::Sigmoid,
                                   renormalize, selection_bias, routed_scaling_factor, renorm_eps);
    return py::make_tuple(r.weights, r.ids);
  }, py::arg("router_logits"), py::arg("top_k"), py::kw_only(), py::arg("scoring") = "softmax",
        py::arg("renormalize") = false, py::arg("selection_bias") = py::none(),
        py::arg("routed_scaling_factor") = 1.0, py::arg("renorm_eps") = 0.0,
        "router logits [T, E] -> (weights float32 [T, k], ids int32 [T, k])");
  m.def("moe_permute", [](const Tensor& ids, int64_t num_experts) {
    const MoePermutation p = moe_permute(ids, num_experts);
    return py::make_tuple(p.token_index, p.slot, p.offs);
  }, py::arg("ids"), py::arg("num_experts"), "ids [T, k] -> (token_index, slot, offs) sorted by expert");
  m.def("moe_experts", [](const Tensor& x, const Tensor& weights, const Tensor& ids, const Tensor& gate_up_proj,
                          const Tensor& down_proj, std::optional<Tensor> gate_up_scale, std::optional<Tensor> down_scale,
                          std::optional<Tensor> shared_gate_up, std::optional<Tensor> shared_down,
                          std::optional<Tensor> shared_gate, std::optional<Tensor> shared_gate_up_scale,
                          std::optional<Tensor> shared_down_scale) {
    const MoeExperts experts = MoeExperts::from_fused(gate_up_proj, down_proj, gate_up_scale, down_scale);
    std::optional<SharedExpert> shared;
    if (shared_gate_up.has_value() || shared_down.has_value() || shared_gate.has_value()) {
      if (!shared_gate_up.has_value() || !shared_down.has_value() || !shared_gate.has_value()) {
        throw py::value_error("moe_experts: a shared expert needs shared_gate_up, shared_down and shared_gate");
      }
      std::optional<Tensor> gu_scale, d_scale;
      if (shared_gate_up_scale.has_value()) gu_scale = shared_gate_up_scale->unsqueeze(0);
      if (shared_down_scale.has_value()) d_scale = shared_down_scale->unsqueeze(0);
      const MoeExperts one = MoeExperts::from_fused(shared_gate_up->unsqueeze(0), shared_down->unsqueeze(0), gu_scale,
                                                    d_scale);
      shared = SharedExpert{one.experts[0], *shared_gate};
    }
    return moe_experts(x, weights, ids, experts, shared);
  }, py::arg("x"), py::arg("weights"), py::arg("ids"), py::arg("gate_up_proj"), py::arg("down_proj"), py::kw_only(),
        py::arg("gate_up_scale") = py::none(), py::arg("down_scale") = py::none(),
        py::arg("shared_gate_up") = py::none(), py::arg("shared_down") = py::none(),
        py::arg("shared_gate") = py::none(), py::arg("shared_gate_up_scale") = py::none(),
        py::arg("shared_down_scale") = py::none(),
        "fused experts: x [T, H], gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I]");
}

}  // namespace kiln::python
