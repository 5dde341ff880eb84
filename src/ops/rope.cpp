// Rotary position embedding front end: HF's default inv_freq and cos/sin tables, shape
// checks for the [..., seq, heads, head_dim] layout, then the rope kernels of the
// device (backend/rope.h).
#include <cmath>
#include <cstdint>
#include <optional>

#include "backend/rope.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/nn.h"
#include "kiln/tensor.h"
#include "ops/autograd_hooks.h"
#include "ops/nn_utils.h"
#include "ops/op_utils.h"

namespace kiln {
namespace {

void check_rotary_dim(int64_t rotary_dim, int64_t head_dim, const char* op) {
  KILN_CHECK_KIND(rotary_dim >= 2 && rotary_dim % 2 == 0, Value, op, "rotary_dim must be even and at least 2, got {}",
                  rotary_dim);
  KILN_CHECK_KIND(head_dim < 0 || rotary_dim <= head_dim, Value, op, "rotary_dim ({}) must not exceed head_dim ({})",
                  rotary_dim, head_dim);
}

void check_x(const Tensor& x, const char* op) {
  check_defined(x, op, "x");
  KILN_CHECK(x.dim() >= 3, op, "expected x of shape [..., seq, heads, head_dim] (at least 3 dims), got {}",
             x.shape_str());
  KILN_CHECK_KIND(is_nn_float(x.dtype()), Type, op, "expected x of dtype float32, float64, float16 or bfloat16, got {}",
                  dtype_name(x.dtype()));
}

void check_theta(double rope_theta, const char* op) {
  KILN_CHECK_KIND(std::isfinite(rope_theta) && rope_theta > 0, Value, op,
                  "rope_theta must be a positive finite number, got {}", rope_theta);
}

void check_positions(const Tensor& positions, const char* op) {
  check_defined(positions, op, "positions");
  KILN_CHECK_KIND(is_integral(positions.dtype()), Type, op, "expected integer positions, got {}",
                  dtype_name(positions.dtype()));
}

// The shapes positions (and tables, without their last dim) may have for x: [seq], or
// x's shape without its last two dims.
bool leading_shape_fits(const Shape& lead, const Tensor& x) {
  const Shape tokens(x.sizes().begin(), x.sizes().end() - 2);
  return lead == tokens || (lead.size() == 1 && lead[0] == x.size(-3));
}

}  // namespace

Tensor rope_inv_freq(int64_t rotary_dim, double rope_theta) {
  constexpr const char* op = "rope_inv_freq";
  check_rotary_dim(rotary_dim, -1, op);
  check_theta(rope_theta, op);
  Tensor inv = Tensor::empty({rotary_dim / 2}, DType::Float32);
  backend::rope_kernels.on(inv.device(), op).inv_freq(current_context(), rotary_dim, rope_theta, inv.data<float>());
  return inv;
}

RopeTables rope_cos_sin(const Tensor& positions, int64_t rotary_dim, double rope_theta, DType dtype) {
  constexpr const char* op = "rope_cos_sin";
  check_positions(positions, op);
  KILN_CHECK_KIND(is_nn_float(dtype), Type, op,
                  "expected a table dtype of float32, float64, float16 or bfloat16, got {}", dtype_name(dtype));
  const Tensor inv = rope_inv_freq(rotary_dim, rope_theta);
  const int64_t half = rotary_dim / 2;
  const Tensor pos = positions.to(DType::Int64).contiguous();
  Shape shape = positions.sizes();
  shape.push_back(half);
  Tensor cos = Tensor::empty(shape, DType::Float32);
  Tensor sin = Tensor::empty(shape, DType::Float32);
  backend::rope_kernels.on(pos.device(), op)
      .cos_sin(current_context(),
               {pos.data<int64_t>(), pos.numel(), inv.data<float>(), half, cos.data<float>(), sin.data<float>()});
  return {cos.to(dtype), sin.to(dtype)};
}

Tensor apply_rotary_emb(const Tensor& x, const Tensor& positions, double rope_theta, std::optional<int64_t> rotary_dim,
                        bool interleaved) {
  constexpr const char* op = "apply_rotary_emb";
  common_device(op, {&x, &positions});
  check_x(x, op);
  check_positions(positions, op);
  check_theta(rope_theta, op);
  const int64_t rd = rotary_dim.value_or(x.size(-1));
  check_rotary_dim(rd, x.size(-1), op);
  KILN_CHECK(leading_shape_fits(positions.sizes(), x), op,
             "expected positions of shape [seq] = [{}] or {} (x's shape without its last two dims), got {}", x.size(-3),
             shape_to_string(Shape(x.sizes().begin(), x.sizes().end() - 2)), positions.shape_str());
  // HF casts its float32 tables to the activation dtype before rotating.
  // The tables are built on the host (positions on a device come over first: a wait),
  // then rotate on x's device.
  const RopeTables tables = rope_cos_sin(positions.to(kCPU), rd, rope_theta, x.dtype());
  return apply_rotary_emb_cos_sin(x, tables.cos.to(x.device()), tables.sin.to(x.device()), interleaved);
}

Tensor apply_rotary_emb_cos_sin(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  KILN_AUTOGRAD(apply_rotary_emb_cos_sin, x, cos, sin, interleaved);
  constexpr const char* op = "apply_rotary_emb_cos_sin";
  common_device(op, {&x, &cos, &sin});
  check_x(x, op);
  check_defined(cos, op, "cos");
  check_defined(sin, op, "sin");
  KILN_CHECK(cos.sizes() == sin.sizes(), op, "expected cos and sin of one shape, got {} and {}", cos.shape_str(),
             sin.shape_str());
  KILN_CHECK_KIND(is_nn_float(cos.dtype()) && is_nn_float(sin.dtype()), Type, op,
                  "expected float cos and sin tables, got {} and {}", dtype_name(cos.dtype()), dtype_name(sin.dtype()));
  KILN_CHECK(cos.dim() >= 2 && leading_shape_fits(Shape(cos.sizes().begin(), cos.sizes().end() - 1), x), op,
             "expected cos and sin of shape [seq, rotary_dim / 2] = [{}, *] or {} + [rotary_dim / 2], got {}",
             x.size(-3), shape_to_string(Shape(x.sizes().begin(), x.sizes().end() - 2)), cos.shape_str());
  const int64_t rd = checked_mul(cos.size(-1), 2, op);
  check_rotary_dim(rd, x.size(-1), op);

  const DType compute = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const Tensor xc = x.contiguous();
  const Tensor c = cos.to(compute).contiguous();
  const Tensor s = sin.to(compute).contiguous();
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device(), op);
  const int64_t heads = x.size(-2), head_dim = x.size(-1);
  // heads * head_dim fits whenever x is not empty (it divides numel).
  const int64_t tokens = x.numel() == 0 ? 0 : x.numel() / (heads * head_dim);
  const int64_t table_rows = cos.numel() / cos.size(-1);
  if (tokens == 0) return out;
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&xc, &out}), 0}; });
  backend::rope_kernels.on(xc.device(), op)
      .rope(current_context(), {x.dtype(), xc.data_ptr(), out.data_ptr(), tokens, heads, head_dim, rd, c.data_ptr(),
                                s.data_ptr(), table_rows, interleaved});
  return out;
}

}  // namespace kiln
