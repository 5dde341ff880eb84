// Elementwise ops with PyTorch's names, argument order, broadcasting, type promotion
// and edge cases (torch.add, torch.exp, torch.where, ...).
//
// Every op broadcasts its tensor operands (torch.broadcast_shapes) and returns a new
// contiguous tensor, except the in-place add_/sub_/mul_/div_, which write `self`.
// Result dtypes follow torch.result_type: a Scalar argument takes part as a wrapped
// Python number, so int8_tensor + 1000 stays int8 (and wraps) while int_tensor + 2.5
// is float32. float16/bfloat16/fp8 are computed in float32 and rounded once on store.
// Mixing an fp8 tensor with another dtype is an error (convert explicitly).
//
// Errors are kiln::Error: Type for a dtype an op does not take (bitwise ops on floats,
// silu on integers), NotImplemented for complex input to an op without complex
// support, Value for a bad option string, Runtime otherwise (shapes that do not
// broadcast, integer division by zero: "ZeroDivisionError", in-place casts PyTorch
// refuses: "result type Float can't be cast to the desired output type Long").
#pragma once

#include <optional>
#include <string_view>

#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln {

// ---------------------------------------------------------------- arithmetic

// a + alpha * b. alpha must be integral for integer results and bool only for bool ones.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
// a - alpha * b. Bool operands are an error (use logical_xor / logical_not).
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
// rounding_mode: nullopt (true division: integer and bool inputs give float32),
// "trunc" (toward zero) or "floor" (toward -inf; Python's //). With a rounding mode
// integers stay integers and a zero divisor throws "ZeroDivisionError"; floats follow
// IEEE (x / 0 = +-inf or NaN).
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode = std::nullopt);
Tensor div(const Tensor& a, const Scalar& b, std::optional<std::string_view> rounding_mode = std::nullopt);
// Python's modulo: the result has the sign of b (torch.remainder; not torch.fmod).
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Scalar& b);
Tensor remainder(const Scalar& a, const Tensor& b);
// a ** b. Integer tensor ** negative integer Scalar is an error ("Integers to negative
// integer powers are not allowed."); integer tensor ** integer tensor truncates instead.
// Exponents 0 and 1 give ones and a copy; 2, 3, 0.5, -0.5, -1, -2 use x*x, x*x*x,
// sqrt, rsqrt, 1/x, 1/(x*x), as PyTorch does.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& exponent);
Tensor pow(const Scalar& base, const Tensor& exponent);
// Elementwise max/min; a NaN in either operand gives NaN. Not for complex.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// atan2(a, b) = the angle of (b, a); integer inputs give float32. Not for complex.
Tensor atan2(const Tensor& a, const Tensor& b);

// In place: self = op(self, other). The result dtype of op(self, other) must be
// castable to self's dtype (torch.can_cast), other must broadcast to self's shape, and
// other may not partially overlap self's memory. Return self.
Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& add_(Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, const Scalar& other);
Tensor& div_(Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode = std::nullopt);
Tensor& div_(Tensor& self, const Scalar& other, std::optional<std::string_view> rounding_mode = std::nullopt);

// ---------------------------------------------------------------- unary

// Integers keep their dtype (wrapping: abs/neg of INT_MIN is INT_MIN); complex abs
// returns the real dtype. abs of bool is an error, neg of bool too (use logical_not).
Tensor abs(const Tensor& x);
Tensor neg(const Tensor& x);
// -1, 0 or 1 (NaN gives 0, as PyTorch); bool stays bool. Complex is an error (sgn).
Tensor sign(const Tensor& x);
// pow(x, 2): bool gives int64.
Tensor square(const Tensor& x);

// Float-valued functions: integer and bool inputs give float32.
// Complex supported: exp, log, sqrt, reciprocal; the others throw NotImplemented.
Tensor exp(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);

// Activations (torch.nn.functional): floating-point input only, as PyTorch.
Tensor silu(const Tensor& x);
// approximate: "none" (x * Phi(x), exact) or "tanh".
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
// log(1 + exp(beta * x)) / beta, or x where beta * x > threshold.
Tensor softplus(const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20);
// max(x, 0) keeping NaN; integers keep their dtype; bool is an error.
Tensor relu(const Tensor& x);

// Rounding: integers are returned unchanged (a copy); bool and complex are errors.
// round is half to even.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);

// ---------------------------------------------------------------- comparison and logic

// Bool results. Operands are compared in their promoted dtype (so uint64 compares as
// unsigned, and uint8_tensor > -1 compares against 255: the scalar wraps to uint8, as
// in PyTorch). Complex supports eq/ne only.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Scalar& b);

Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);

// Nonzero is true (NaN included). Any dtypes; bool out.
Tensor logical_not(const Tensor& x);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);

// Bool and integer tensors only. Shifts: integers only; a shift by a negative amount
// or by at least the bit width gives 0 (left) or the sign fill (right).
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, const Scalar& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Scalar& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Scalar& b);
Tensor bitwise_not(const Tensor& x);
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_left_shift(const Tensor& a, const Scalar& b);
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_right_shift(const Tensor& a, const Scalar& b);

// ---------------------------------------------------------------- selection

// cond ? a : b, broadcast over all three. cond is bool (or uint8, nonzero = true); the
// result dtype is result_type(a, b).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
Tensor where(const Tensor& cond, const Scalar& a, const Scalar& b);

// min(max(x, min), max) in result_type(x, min, max). At least one bound is required;
// min > max gives max; a NaN input or tensor bound gives NaN. With both Scalar bounds
// a NaN bound gives NaN everywhere; a lone NaN Scalar bound is ignored (PyTorch's CPU
// behaviour, pinned in the tests). Bool results and complex are errors.
Tensor clamp(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max);
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max);
Tensor clamp_min(const Tensor& x, const Scalar& min);
Tensor clamp_min(const Tensor& x, const Tensor& min);
Tensor clamp_max(const Tensor& x, const Scalar& max);
Tensor clamp_max(const Tensor& x, const Tensor& max);

}  // namespace kiln
