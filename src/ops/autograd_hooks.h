// The hook table of the differentiable ops (internal; docs/autograd.md).
//
// Every differentiable op front end starts with one line, KILN_AUTOGRAD(slot, args...):
// when grad mode is on and an argument requires grad, the op is handed to the entry the
// autograd layer (src/autograd, above the ops) installed in `slot`, which computes the op
// with recording off and records its backward formula. Otherwise the op runs as if
// autograd did not exist: the cost is one null-pointer test per tensor argument. A slot
// left empty raises NotImplemented naming the op, never a silently missing gradient.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/autograd_meta.h"
#include "kiln/ops/moe.h"
#include "kiln/ops/reduce.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln::autograd_hooks {

using OptTensor = std::optional<Tensor>;
using Unary = Tensor (*)(const Tensor&);
using Reduction = Tensor (*)(const Tensor&, const DimList&, bool, std::optional<DType>);

struct OpHooks {
  // elementwise arithmetic
  Tensor (*add)(const Tensor&, const Tensor&, const Scalar&) = nullptr;
  Tensor (*add_scalar)(const Tensor&, const Scalar&, const Scalar&) = nullptr;
  Tensor (*sub)(const Tensor&, const Tensor&, const Scalar&) = nullptr;
  Tensor (*sub_scalar)(const Tensor&, const Scalar&, const Scalar&) = nullptr;
  Tensor (*mul)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*mul_scalar)(const Tensor&, const Scalar&) = nullptr;
  Tensor (*div)(const Tensor&, const Tensor&, std::optional<std::string_view>) = nullptr;
  Tensor (*div_scalar)(const Tensor&, const Scalar&, std::optional<std::string_view>) = nullptr;
  Tensor (*remainder)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*remainder_scalar)(const Tensor&, const Scalar&) = nullptr;
  Tensor (*remainder_scalar_tensor)(const Scalar&, const Tensor&) = nullptr;
  Tensor (*pow)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*pow_scalar)(const Tensor&, const Scalar&) = nullptr;
  Tensor (*pow_scalar_base)(const Scalar&, const Tensor&) = nullptr;
  Tensor (*maximum)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*minimum)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*atan2)(const Tensor&, const Tensor&) = nullptr;
  // elementwise unary
  Unary abs = nullptr, neg = nullptr, sign = nullptr, square = nullptr, exp = nullptr, exp2 = nullptr,
        expm1 = nullptr, log = nullptr, log2 = nullptr, log1p = nullptr, sqrt = nullptr, rsqrt = nullptr,
        reciprocal = nullptr, sin = nullptr, cos = nullptr, tanh = nullptr, sigmoid = nullptr, silu = nullptr,
        relu = nullptr, floor = nullptr, ceil = nullptr, round = nullptr, trunc = nullptr;
  Tensor (*gelu)(const Tensor&, std::string_view) = nullptr;
  Tensor (*softplus)(const Tensor&, const Scalar&, const Scalar&) = nullptr;
  // selection
  Tensor (*where)(const Tensor&, const Tensor&, const Tensor&) = nullptr;
  Tensor (*where_scalar_other)(const Tensor&, const Tensor&, const Scalar&) = nullptr;
  Tensor (*where_scalar_self)(const Tensor&, const Scalar&, const Tensor&) = nullptr;
  Tensor (*clamp_scalar)(const Tensor&, const std::optional<Scalar>&, const std::optional<Scalar>&) = nullptr;
  Tensor (*clamp)(const Tensor&, const OptTensor&, const OptTensor&) = nullptr;
  Tensor (*masked_fill_scalar)(const Tensor&, const Tensor&, const Scalar&) = nullptr;
  Tensor (*masked_fill)(const Tensor&, const Tensor&, const Tensor&) = nullptr;
  // reductions
  Reduction sum = nullptr, mean = nullptr, prod = nullptr;
  Tensor (*amax)(const Tensor&, const DimList&, bool) = nullptr;
  Tensor (*amin)(const Tensor&, const DimList&, bool) = nullptr;
  Tensor (*max_all)(const Tensor&) = nullptr;
  Tensor (*min_all)(const Tensor&) = nullptr;
  ValuesIndices (*max_dim)(const Tensor&, int64_t, bool) = nullptr;
  ValuesIndices (*min_dim)(const Tensor&, int64_t, bool) = nullptr;
  Tensor (*var)(const Tensor&, const DimList&, double, bool) = nullptr;
  Tensor (*std)(const Tensor&, const DimList&, double, bool) = nullptr;
  Tensor (*norm)(const Tensor&, double, const DimList&, bool) = nullptr;
  Tensor (*cumsum)(const Tensor&, int64_t, std::optional<DType>) = nullptr;
  ValuesIndices (*sort)(const Tensor&, int64_t, bool, bool) = nullptr;
  ValuesIndices (*topk)(const Tensor&, int64_t, int64_t, bool, bool) = nullptr;
  // joining and index ops
  Tensor (*cat)(const std::vector<Tensor>&, int64_t) = nullptr;
  Tensor (*stack)(const std::vector<Tensor>&, int64_t) = nullptr;
  Tensor (*flip)(const Tensor&, const std::vector<int64_t>&) = nullptr;
  Tensor (*index_select)(const Tensor&, int64_t, const Tensor&) = nullptr;
  Tensor (*gather)(const Tensor&, int64_t, const Tensor&) = nullptr;
  Tensor (*scatter_add)(const Tensor&, int64_t, const Tensor&, const Tensor&) = nullptr;
  Tensor (*index_add)(const Tensor&, int64_t, const Tensor&, const Tensor&, const Scalar&) = nullptr;
  Tensor (*embedding)(const Tensor&, const Tensor&, std::optional<int64_t>) = nullptr;
  Tensor (*masked_select)(const Tensor&, const Tensor&) = nullptr;
  // products
  Tensor (*matmul)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*mm)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*bmm)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*mv)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*dot)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*linear)(const Tensor&, const Tensor&, const OptTensor&) = nullptr;
  Tensor (*linear_fp8)(const Tensor&, const Tensor&, const Tensor&, const OptTensor&) = nullptr;
  Tensor (*grouped_mm)(const Tensor&, const Tensor&, const OptTensor&, const OptTensor&, std::optional<DType>) = nullptr;
  // nn
  Tensor (*softmax)(const Tensor&, int64_t, std::optional<DType>) = nullptr;
  Tensor (*log_softmax)(const Tensor&, int64_t, std::optional<DType>) = nullptr;
  Tensor (*rms_norm)(const Tensor&, const Shape&, const OptTensor&, std::optional<double>) = nullptr;
  Tensor (*rms_norm_llama)(const Tensor&, const Tensor&, double) = nullptr;
  Tensor (*rms_norm_one_plus)(const Tensor&, const Tensor&, double) = nullptr;
  Tensor (*rms_norm_gated)(const Tensor&, const Tensor&, const Tensor&, double) = nullptr;
  Tensor (*layer_norm)(const Tensor&, const Shape&, const OptTensor&, const OptTensor&, double) = nullptr;
  Tensor (*apply_rotary_emb_cos_sin)(const Tensor&, const Tensor&, const Tensor&, bool) = nullptr;
  Tensor (*silu_and_mul)(const Tensor&) = nullptr;
  Tensor (*scaled_dot_product_attention)(const Tensor&, const Tensor&, const Tensor&, const OptTensor&, double, bool,
                                         std::optional<double>, bool) = nullptr;
  Tensor (*attention_decode)(const Tensor&, const Tensor&, const Tensor&, int64_t, std::optional<double>) = nullptr;
  Tensor (*constant_pad)(const Tensor&, const std::vector<int64_t>&, double) = nullptr;
  Tensor (*interpolate)(const Tensor&, const std::vector<int64_t>&, const std::vector<double>&, std::string_view,
                        std::optional<bool>, bool) = nullptr;
  Tensor (*interpolate_backward)(const Tensor&, const Shape&, const std::vector<int64_t>&, const std::vector<double>&,
                                 std::string_view, std::optional<bool>, bool) = nullptr;
  Tensor (*moe_experts)(const Tensor&, const Tensor&, const Tensor&, const MoeExperts&,
                        const std::optional<SharedExpert>&) = nullptr;
  Tensor (*convolution)(const Tensor&, const Tensor&, const OptTensor&, const std::vector<int64_t>&,
                        const std::vector<int64_t>&, const std::vector<int64_t>&, bool, const std::vector<int64_t>&,
                        int64_t) = nullptr;
  Tensor (*convolution_weight_grad)(const Tensor&, const Tensor&, const Shape&, const std::vector<int64_t>&,
                                    const std::vector<int64_t>&, const std::vector<int64_t>&, int64_t) = nullptr;
};
OpHooks& op_hooks();

// ---- which arguments can require grad ----
inline bool might_record(const Tensor& t) { return t.has_autograd_meta(); }
inline bool might_record(const OptTensor& t) { return t.has_value() && t->has_autograd_meta(); }
bool might_record(const std::vector<Tensor>& ts);
bool might_record(const MoeExperts& experts);
bool might_record(const std::optional<SharedExpert>& shared);
template <typename T>
bool might_record(const T&) {  // sizes, dims, scalars, options
  return false;
}

template <typename... Args>
bool any_records(const Args&... args) {
  // The inline test first: for tensors without autograd metadata nothing else is read.
  return (might_record(args) || ...) && GradMode::is_enabled();
}

}  // namespace kiln::autograd_hooks

// The first line of a differentiable op front end (see above).
#define KILN_AUTOGRAD(slot, ...)                                                                          \
  do {                                                                                                    \
    if (::kiln::autograd_hooks::any_records(__VA_ARGS__)) [[unlikely]]                                    \
      return ::kiln::autograd_hooks::installed(::kiln::autograd_hooks::op_hooks().slot, #slot)(__VA_ARGS__); \
  } while (0)
