// Neural-network building blocks of the decode hot path: softmax, normalisations,
// rotary position embedding and the fused SwiGLU activation.
//
// Dtypes ("compute wide, store narrow": float16/bfloat16 compute in float32 and store
// the result once; float64 computes in float64):
//   op                      float32  float64  float16  bfloat16   others
//   softmax, log_softmax    yes      yes      yes      yes        Type error (pass dtype=)
//   rms_norm (all variants) yes      yes      yes      yes        Type error
//   layer_norm              yes      yes      yes      yes        Type error
//   apply_rotary_emb*       yes      yes      yes      yes        Type error
//   silu_and_mul            yes      yes      yes      yes        Type error
// Inputs may have any strides; outputs are new contiguous tensors. Everything runs on
// kiln's default thread pool.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/tensor.h"

namespace kiln {

// ---------------------------------------------------------------------------------
// Softmax

// torch.softmax(input, dim, dtype=None): exp(x - max) / sum over `dim` (any dim; a
// 0-dim input counts as one element, whose softmax is 1). With `dtype` the input is
// converted to it first and the result has it; otherwise the result has the input's
// dtype. Integer, bool, complex and float8 input is a Type error, as in PyTorch
// ("softmax_lastdim_kernel_impl" not implemented for 'Long').
// Numerics: a row of only -inf gives NaN (exp(-inf - -inf)), as PyTorch; -inf
// elements of other rows give 0; a NaN anywhere in a row makes the whole row NaN;
// sums are accumulated in blocks in the compute dtype and combined in double.
// In float32 the exp is within 2 ulp, and terms below e^-86.6 (2.4e-38) of the row's
// max flush to 0.
Tensor softmax(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt);
// torch.log_softmax: x - max - log(sum exp(x - max)). Same rules as softmax (a row of
// only -inf gives NaN; a -inf element of another row gives -inf).
Tensor log_softmax(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt);

// ---------------------------------------------------------------------------------
// Normalisation. `normalized_shape` names the trailing dims normalised together (at
// least one); weight and bias have exactly that shape. Statistics are accumulated in
// float32 (float64 for float64 input); a row of zero elements gives an empty result.

// torch.nn.functional.rms_norm: y = x * rsqrt(mean(x^2) + eps) * weight, computed in
// float32 (float64 when the input or weight is float64) and rounded to the input's
// dtype once (PyTorch's composite: the weight is applied before the cast). The result
// has the input's dtype; weight may be any float dtype. eps = None uses the epsilon of the compute dtype, as PyTorch's
// code does: 2^-23 for float32, float16 and bfloat16 input, 2^-52 for float64.
Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);

// The variants HF models use (spec/models.md §0.1), all over the last dim, weight of
// shape [input.size(-1)]. They compute in float32 (HF's upcast), or in float64 when an
// operand is float64 (where HF's `.to(float32)` would narrow it):
//
// Llama / Qwen3 / LFM2 (LlamaRMSNorm): y = weight * cast_to_input_dtype(x * rsqrt(...)):
// the normalised value is rounded to the input dtype before the weight multiplies it,
// and the result has promote_types(input, weight) (float32 weight on bfloat16 input
// gives float32, as in HF).
Tensor rms_norm_llama(const Tensor& input, const Tensor& weight, double eps);
// Qwen3-Next / Qwen3.5 zero-centred norm: y = cast_to_input_dtype(x * rsqrt(...) *
// (1 + weight)), all in float32; the stored weight is an offset (initialised to 0).
Tensor rms_norm_one_plus(const Tensor& input, const Tensor& weight, double eps);
// Qwen3-Next / Qwen3.5 gated DeltaNet output norm: norm first, then the gate:
// n = weight * cast_to_input_dtype(x * rsqrt(...)) (in promote_types(input, weight)),
// y = cast_to_input_dtype(n * silu(gate)) with silu in float32. gate has the input's
// shape and any float dtype; the result has the input's dtype.
Tensor rms_norm_gated(const Tensor& input, const Tensor& gate, const Tensor& weight, double eps);

// torch.nn.functional.layer_norm: (x - mean) / sqrt(var + eps) * weight + bias with the
// biased variance (two passes: mean, then squared deviations). weight and bias have
// the input's dtype, or float32 when the input is float16/bfloat16 (PyTorch's mixed
// dtype rule); the result has the input's dtype.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape,
                  const std::optional<Tensor>& weight = std::nullopt, const std::optional<Tensor>& bias = std::nullopt,
                  double eps = 1e-5);

// ---------------------------------------------------------------------------------
// Rotary position embedding (RoPE), default rope type (no rope_scaling).
//
// Layout: x is [..., seq, heads, head_dim] -- the layout a projection [tokens, heads *
// head_dim] views into without a transpose (HF transposes to [batch, heads, seq,
// head_dim] first; the math is the same). Only the first `rotary_dim` entries of each
// head rotate; the rest pass through unchanged (partial rotary, e.g. Qwen3-Next's
// 64 of 256). Pairs:
//   interleaved = false: rotate_half / GPT-NeoX style (HF Llama, Qwen, LFM2): element
//     i pairs with i + rotary_dim/2: out = x * cos + rotate_half(x) * sin with
//     rotate_half(x) = concat(-x[half:], x[:half]).
//   interleaved = true: GPT-J style: elements 2i and 2i+1 pair.
// Pair i turns by angle position * inv_freq[i].
//
// Positions: integer tensor of shape [seq] (shared by every leading index) or of x's
// shape without the last two dims (one position per token). Any values, negative
// included.

// inv_freq[i] = 1 / theta^(2i / rotary_dim), i < rotary_dim / 2, as a float32 tensor.
// HF computes it in float32 (`1.0 / (base ** (arange(0, d, 2).float() / d))`); kiln
// repeats those float32 steps with a correctly rounded power, so it matches HF's table
// to the last bit wherever HF's power is correctly rounded.
Tensor rope_inv_freq(int64_t rotary_dim, double rope_theta);

// cos and sin tables of shape [*positions.shape, rotary_dim / 2]: angle = float32(
// float(position) * inv_freq[i]) exactly as HF's float32 matmul forms it, cos/sin
// evaluated accurately and rounded to `dtype` (HF casts its tables to the activation
// dtype, so pass x's dtype to reproduce it). Compute them once per step and reuse them
// across layers with apply_rotary_emb_cos_sin.
struct RopeTables {
  Tensor cos;
  Tensor sin;
};
RopeTables rope_cos_sin(const Tensor& positions, int64_t rotary_dim, double rope_theta, DType dtype = DType::Float32);

// RoPE of x at `positions`: rope_cos_sin(positions, rotary_dim, rope_theta, x.dtype())
// applied by apply_rotary_emb_cos_sin. rotary_dim defaults to head_dim; it must be even
// and in [2, head_dim]. The result has x's dtype and shape.
Tensor apply_rotary_emb(const Tensor& x, const Tensor& positions, double rope_theta,
                        std::optional<int64_t> rotary_dim = std::nullopt, bool interleaved = false);

// RoPE with precomputed tables: cos and sin (any float dtype, used as float32 values)
// have shape [seq, rotary_dim / 2] or [*x.shape[:-2], rotary_dim / 2]; rotary_dim is
// twice their last dim. The rotation is computed in float32 (float64 for float64 x)
// and rounded once to x's dtype.
Tensor apply_rotary_emb_cos_sin(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved = false);

// ---------------------------------------------------------------------------------
// Fused SwiGLU activation

// x [..., 2*I] -> silu(x[..., :I]) * x[..., I:] of shape [..., I] (vLLM's silu_and_mul;
// the gate half comes first, as in HF's fused gate_up_proj). Computed in float32
// (float64 for float64) and rounded once; HF's unfused act(gate) * up rounds twice in
// bfloat16, a difference of at most one bfloat16 ulp.
Tensor silu_and_mul(const Tensor& input);

}  // namespace kiln
