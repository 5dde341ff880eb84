// Gated DeltaNet front ends: validate shapes and dtypes, widen inputs to contiguous
// float32 once, then one call through the gated_delta kernel table.
#include "kiln/ops/gated_delta.h"

#include <cmath>

#include "backend/gated_delta.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "ops/nn_utils.h"
#include "ops/op_utils.h"
#include "ops/out_checks.h"
#include "core/memory_overlap.h"
#include "kiln/ops/out_variants.h"

namespace kiln {
namespace {

bool is_float_input(DType t) { return t == DType::Float32 || t == DType::BFloat16 || t == DType::Float16; }

void check_float(const Tensor& t, const char* op, const char* name) {
  check_defined(t, op, name);
  KILN_CHECK_KIND(is_float_input(t.dtype()), Type, op, "expected {} of dtype float32, bfloat16 or float16, got {}",
                  name, dtype_name(t.dtype()));
}

// A state tensor the kernel updates in place: float32, contiguous, of `shape`.
void check_state(const Tensor& state, const Shape& shape, const char* op, const char* name) {
  check_defined(state, op, name);
  KILN_CHECK_KIND(state.dtype() == DType::Float32, Type, op, "expected {} of dtype float32, got {}", name,
                  dtype_name(state.dtype()));
  KILN_CHECK(state.sizes() == shape, op, "expected {} of shape {}, got {}", name, shape_to_string(shape),
             state.shape_str());
  KILN_CHECK(state.is_contiguous(), op, "{} must be contiguous (it is updated in place)", name);
  check_writable(state, op);
}

Tensor as_float32(const Tensor& t) { return t.to(DType::Float32).contiguous(); }

}  // namespace

namespace {

// causal_conv1d, into `into` when given (causal_conv1d_out).
Tensor causal_conv1d_impl(const char* op, const Tensor& x, const Tensor& weight, Tensor& conv_state,
                          const std::string& activation, const Tensor* into) {
  check_float(x, op, "x");
  check_float(weight, op, "weight");
  KILN_CHECK(x.dim() == 2, op, "expected x of shape [tokens, channels], got {}", x.shape_str());
  KILN_CHECK_KIND(activation == "silu" || activation == "none", Value, op,
                  "activation must be \"silu\" or \"none\", got \"{}\"", activation);
  const int64_t channels = x.size(1);
  const bool conv_layout = weight.dim() == 3 && weight.size(1) == 1;  // nn.Conv1d's [C, 1, K]
  KILN_CHECK((weight.dim() == 2 || conv_layout) && weight.size(0) == channels && weight.size(-1) >= 1, op,
             "expected weight of shape [channels, kernel] or [channels, 1, kernel] with channels = {}, got {}",
             channels, weight.shape_str());
  const int64_t kernel = weight.size(-1);
  check_state(conv_state, {kernel - 1, channels}, op, "conv_state");
  const Device device = common_device(op, {&x, &weight, &conv_state});
  if (into != nullptr) {
    out_detail::check_out(op, *into, {x.size(0), channels}, x.dtype(), device, {&x, &weight, &conv_state});
  }

  // The kernel writes float32: straight into a float32 `into`.
  const bool direct = into != nullptr && x.dtype() == DType::Float32;
  Tensor out = direct ? *into : Tensor::empty({x.size(0), channels}, DType::Float32, device, op);
  const OpProfile profile(op, [&] {
    return OpCost{tensor_bytes({&x, &weight, &out}) + 2 * tensor_bytes({&conv_state}),
                  2.0 * static_cast<double>(x.numel()) * static_cast<double>(kernel)};
  });
  if (x.numel() > 0) {
    const Tensor xf = as_float32(x);
    const Tensor wf = as_float32(weight.reshape({channels, kernel}));
    // x, out, the weights and the state read and written; one multiply-add per tap.
    const OpProfile profile(op, [&] {
      return OpCost{tensor_bytes({&xf, &wf, &out}) + 2.0 * static_cast<double>(conv_state.nbytes()),
                    2.0 * static_cast<double>(x.numel()) * static_cast<double>(kernel)};
    });
    backend::gated_delta_kernels.on(x.device(), op)
        .causal_conv1d(current_context(), {xf.data<float>(), wf.data<float>(), conv_state.data<float>(),
                                           out.data<float>(), x.size(0), channels, kernel, activation == "silu"});
  }
  if (into == nullptr) return out.to(x.dtype());
  Tensor result = *into;
  if (!direct) result.copy_(out);
  return result;
}

}  // namespace

Tensor causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, const std::string& activation) {
  return causal_conv1d_impl("causal_conv1d", x, weight, conv_state, activation, nullptr);
}

void causal_conv1d_out(const Tensor& out, const Tensor& x, const Tensor& weight, Tensor& conv_state,
                       const std::string& activation) {
  causal_conv1d_impl("causal_conv1d_out", x, weight, conv_state, activation, &out);
}

namespace {

// gated_delta_gates, into `into` (g, beta) when given (gated_delta_gates_out).
DeltaGates gated_delta_gates_impl(const char* op, const Tensor& a, const Tensor& b, const Tensor& A_log,
                                  const Tensor& dt_bias, const DeltaGates* into) {
  check_float(a, op, "a");
  check_float(b, op, "b");
  check_float(A_log, op, "A_log");
  check_float(dt_bias, op, "dt_bias");
  KILN_CHECK(a.dim() >= 1 && a.sizes() == b.sizes(), op, "expected a and b of one shape [..., heads], got {} and {}",
             a.shape_str(), b.shape_str());
  const int64_t heads = a.size(-1);
  KILN_CHECK(A_log.sizes() == Shape{heads} && dt_bias.sizes() == Shape{heads}, op,
             "expected A_log and dt_bias of shape [{}] (the last dim of a), got {} and {}", heads, A_log.shape_str(),
             dt_bias.shape_str());
  const Device device = common_device(op, {&a, &b, &A_log, &dt_bias});
  if (into != nullptr) {
    for (const Tensor* t : {&into->g, &into->beta}) {
      out_detail::check_out(op, *t, a.sizes(), DType::Float32, device, {&a, &b, &A_log, &dt_bias});
    }
    check_no_overlap(into->g, into->beta, op);
  }
  DeltaGates gates = into != nullptr ? *into
                                     : DeltaGates{Tensor::empty(a.sizes(), DType::Float32, device, op),
                                                  Tensor::empty(a.sizes(), DType::Float32, device, op)};
  if (a.numel() == 0) return gates;
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&a, &b, &gates.g, &gates.beta}), 0}; });
  const Tensor af = as_float32(a), bf = as_float32(b), lf = as_float32(A_log), df = as_float32(dt_bias);
  backend::gated_delta_kernels.on(a.device(), op)
      .gates(current_context(), {af.data<float>(), bf.data<float>(), lf.data<float>(), df.data<float>(),
                                 gates.g.data<float>(), gates.beta.data<float>(), a.numel() / heads, heads});
  return gates;
}

}  // namespace

DeltaGates gated_delta_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias) {
  return gated_delta_gates_impl("gated_delta_gates", a, b, A_log, dt_bias, nullptr);
}

void gated_delta_gates_out(const Tensor& g, const Tensor& beta, const Tensor& a, const Tensor& b, const Tensor& A_log,
                           const Tensor& dt_bias) {
  const DeltaGates into{g, beta};
  gated_delta_gates_impl("gated_delta_gates_out", a, b, A_log, dt_bias, &into);
}

namespace {

// Validates the rule's inputs (named after `op`) and runs `kernel` on float32 copies.
template <typename RunKernel>
Tensor run_gated_delta_rule(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                            const Tensor& beta, Tensor& state, bool use_qk_l2norm_in_kernel,
                            std::optional<double> scale, RunKernel kernel, const Tensor* into = nullptr) {
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{q, "q"}, {k, "k"}, {v, "v"}, {g, "g"},
                                {beta, "beta"}}) {
    check_float(t, op, name);
  }
  KILN_CHECK(q.dim() == 3 && q.sizes() == k.sizes(), op,
             "expected q and k of one shape [tokens, key_heads, key_dim], got {} and {}", q.shape_str(), k.shape_str());
  const int64_t tokens = q.size(0), key_heads = q.size(1), key_dim = q.size(2);
  KILN_CHECK(v.dim() == 3 && v.size(0) == tokens, op, "expected v of shape [tokens = {}, value_heads, value_dim], got {}",
             tokens, v.shape_str());
  const int64_t value_heads = v.size(1), value_dim = v.size(2);
  KILN_CHECK(key_heads > 0 && key_dim > 0 && value_heads > 0 && value_dim > 0, op,
             "expected non-empty heads, got q {} and v {}", q.shape_str(), v.shape_str());
  KILN_CHECK(value_heads % key_heads == 0, op, "value heads ({}) must be a multiple of key heads ({})", value_heads,
             key_heads);
  const Shape gate_shape{tokens, value_heads};
  KILN_CHECK(g.sizes() == gate_shape && beta.sizes() == gate_shape, op,
             "expected g and beta of shape {}, got {} and {}", shape_to_string(gate_shape), g.shape_str(),
             beta.shape_str());
  check_state(state, {value_heads, key_dim, value_dim}, op, "state");
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(key_dim)));
  KILN_CHECK_KIND(std::isfinite(s), Value, op, "scale must be finite, got {}", s);
  // The state is [value_heads, key_dim, value_dim] float32: its byte count must fit.
  checked_mul(checked_mul(checked_mul(value_heads, key_dim, op), value_dim, op), int64_t{4}, op);
  const Device device = common_device(op, {&q, &k, &v, &g, &beta, &state});

  if (into != nullptr) {
    out_detail::check_out(op, *into, {tokens, value_heads, value_dim}, DType::Float32, device,
                          {&q, &k, &v, &g, &beta, &state});
  }
  Tensor out = into != nullptr ? *into : Tensor::empty({tokens, value_heads, value_dim}, DType::Float32, device, op);
  if (tokens == 0) return out;
  // The recurrent count per token and state entry (two multiply-adds to read S^T k and
  // S^T q, a decay, and a multiply-add to write); the chunked form does about as much.
  const OpProfile profile(op, [&] {
    return OpCost{tensor_bytes({&q, &k, &v, &g, &beta, &out}) + 2 * tensor_bytes({&state}),
                  7.0 * static_cast<double>(tokens) * static_cast<double>(value_heads * key_dim * value_dim)};
  });
  const Tensor qf = as_float32(q), kf = as_float32(k), vf = as_float32(v), gf = as_float32(g), bf = as_float32(beta);
  kernel(backend::gated_delta_kernels.on(q.device(), op),
         backend::GatedDeltaRuleProblem{qf.data<float>(), kf.data<float>(), vf.data<float>(), gf.data<float>(),
                                        bf.data<float>(), state.data<float>(), out.data<float>(), tokens, key_heads,
                                        value_heads, key_dim, value_dim, use_qk_l2norm_in_kernel,
                                        static_cast<float>(s)});
  return out;
}

}  // namespace

Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        Tensor& state, bool use_qk_l2norm_in_kernel, std::optional<double> scale) {
  return run_gated_delta_rule("gated_delta_rule", q, k, v, g, beta, state, use_qk_l2norm_in_kernel, scale,
                              [](const backend::GatedDeltaKernels& kernels, const backend::GatedDeltaRuleProblem& p) {
                                kernels.rule(current_context(), p);
                              });
}

void gated_delta_rule_out(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, Tensor& state, bool use_qk_l2norm_in_kernel,
                          std::optional<double> scale) {
  run_gated_delta_rule(
      "gated_delta_rule_out", q, k, v, g, beta, state, use_qk_l2norm_in_kernel, scale,
      [](const backend::GatedDeltaKernels& kernels, const backend::GatedDeltaRuleProblem& p) {
        kernels.rule(current_context(), p);
      },
      &out);
}

Tensor gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                Tensor& state, bool use_qk_l2norm_in_kernel, std::optional<double> scale,
                                int64_t chunk_size) {
  constexpr const char* op = "gated_delta_rule_chunked";
  KILN_CHECK_KIND(chunk_size >= 1 && chunk_size <= kMaxDeltaChunkSize, Value, op,
                  "chunk_size must be in [1, {}], got {}", kMaxDeltaChunkSize, chunk_size);
  return run_gated_delta_rule(op, q, k, v, g, beta, state, use_qk_l2norm_in_kernel, scale,
                              [&](const backend::GatedDeltaKernels& kernels, const backend::GatedDeltaRuleProblem& p) {
                                require_kernel(kernels.rule_chunked, q.device(), op)(current_context(), p, chunk_size);
                              });
}

namespace {

// A float32 contiguous tensor of `shape` (the fused decode step takes its buffers as they are).
void check_decode_tensor(const Tensor& t, const Shape& shape, const char* op, const char* name) {
  check_defined(t, op, name);
  KILN_CHECK_KIND(t.dtype() == DType::Float32, Type, op, "expected {} of dtype float32, got {}", name,
                  dtype_name(t.dtype()));
  KILN_CHECK(t.sizes() == shape, op, "expected {} of shape {}, got {}", name, shape_to_string(shape), t.shape_str());
  KILN_CHECK(t.is_contiguous(), op, "{} must be contiguous", name);
}

}  // namespace

void delta_net_decode_out(const Tensor& out, const Tensor& qkv, const Tensor& z, const Tensor& a, const Tensor& b,
                          const DeltaNetDecodeWeights& weights, Tensor& conv_state, Tensor& state) {
  constexpr const char* op = "delta_net_decode_out";
  check_defined(state, op, "state");
  KILN_CHECK(state.dim() == 3, op, "expected state of shape [value_heads, key_dim, value_dim], got {}",
             state.shape_str());
  const int64_t hv = state.size(0), dk = state.size(1), dv = state.size(2), hk = weights.key_heads;
  KILN_CHECK(hv > 0 && dk > 0 && dv > 0, op, "expected a non-empty state, got {}", state.shape_str());
  KILN_CHECK_KIND(hk > 0 && hv % hk == 0, Value, op,
                  "key_heads must be positive and divide the value heads ({}), got {}", hv, hk);
  const int64_t key_width = checked_mul(hk, dk, op);
  const int64_t channels = checked_add(checked_mul(int64_t{2}, key_width, op), checked_mul(hv, dv, op), op);
  // The state's byte count must fit, as gated_delta_rule checks it.
  checked_mul(checked_mul(checked_mul(hv, dk, op), dv, op), int64_t{4}, op);
  check_decode_tensor(state, {hv, dk, dv}, op, "state");
  check_decode_tensor(qkv, {1, channels}, op, "qkv");
  check_decode_tensor(z, {1, hv, dv}, op, "z");
  check_decode_tensor(a, {1, hv}, op, "a");
  check_decode_tensor(b, {1, hv}, op, "b");
  const Tensor& w = weights.conv_weight;
  check_defined(w, op, "conv_weight");
  const bool conv_layout = w.dim() == 3 && w.size(1) == 1;  // nn.Conv1d's [C, 1, K]
  KILN_CHECK((w.dim() == 2 || conv_layout) && w.size(0) == channels && w.size(-1) >= 1, op,
             "expected conv_weight of shape [channels, kernel] or [channels, 1, kernel] with channels = {}, got {}",
             channels, w.shape_str());
  const int64_t kernel = w.size(-1);
  check_decode_tensor(w, w.sizes(), op, "conv_weight");
  check_decode_tensor(conv_state, {kernel - 1, channels}, op, "conv_state");
  check_decode_tensor(weights.A_log, {hv}, op, "A_log");
  check_decode_tensor(weights.dt_bias, {hv}, op, "dt_bias");
  check_decode_tensor(weights.norm_weight, {dv}, op, "norm_weight");
  KILN_CHECK_KIND(std::isfinite(weights.norm_eps) && weights.norm_eps >= 0, Value, op,
                  "norm_eps must be finite and >= 0, got {}", weights.norm_eps);
  const Device device = common_device(op, {&qkv, &z, &a, &b, &w, &conv_state, &weights.A_log, &weights.dt_bias,
                                           &weights.norm_weight, &state});
  out_detail::check_out(op, out, {1, hv, dv}, DType::Float32, device,
                        {&qkv, &z, &a, &b, &w, &conv_state, &weights.A_log, &weights.dt_bias, &weights.norm_weight,
                         &state});
  // The two states are written while everything else is read.
  for (const Tensor* written : {&conv_state, &state}) {
    check_writable(*written, op);
    for (const Tensor* read : {&qkv, &z, &a, &b, &w, &weights.A_log, &weights.dt_bias, &weights.norm_weight}) {
      check_no_overlap(*written, *read, op);
    }
  }
  check_no_overlap(conv_state, state, op);
  const auto& kernels = backend::gated_delta_kernels.on(device, op);
  const auto run = require_kernel(kernels.delta_net_decode, device, op);
  // The weights and inputs read once, both states read and written, out written.
  const OpProfile profile(op, [&] {
    return OpCost{tensor_bytes({&qkv, &z, &a, &b, &w, &weights.A_log, &weights.dt_bias, &weights.norm_weight, &out}) +
                      2 * tensor_bytes({&conv_state, &state}),
                  7.0 * static_cast<double>(hv * dk * dv)};
  });
  // gated_delta_rule's default scale, and the eps the float32 norm kernel is given.
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  const double eps = static_cast<double>(static_cast<float>(weights.norm_eps));
  run(current_context(),
      backend::DeltaNetDecodeProblem{qkv.data<float>(), w.data<float>(), conv_state.data<float>(), a.data<float>(),
                                     b.data<float>(), weights.A_log.data<float>(), weights.dt_bias.data<float>(),
                                     state.data<float>(), z.data<float>(), weights.norm_weight.data<float>(),
                                     out.data<float>(), hk, hv, dk, dv, kernel, scale, eps});
}

}  // namespace kiln
