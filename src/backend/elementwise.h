// The elementwise family of the kernel table: unary, binary and ternary ops over
// broadcast operands, and the fused silu_and_mul (front ends: src/ops/elementwise_*.cpp,
// activation_fused.cpp).
//
// A kernel reads its inputs as arrays of one compute dtype (f32 for f16/bf16/fp8
// storage, f64, native integers, bool, complex) and writes `out_compute`, which the
// backend casts to out's dtype; broadcasting, strides and narrow storage are the
// backend's to handle. Comparisons, logical ops and isnan/isinf/isfinite write bool;
// complex abs writes the real dtype; everything else writes its compute dtype.
#pragma once

#include <complex>
#include <cstdint>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/dtype.h"
#include "kiln/tensor.h"
#include "kiln/tensor_limits.h"

namespace kiln::backend {

// The most dims a tensor may have in an elementwise or indexing kernel: the most any
// kiln tensor may have (kMaxTensorDims, PyTorch's limit), so no op refuses a view for
// its rank alone.
inline constexpr int kMaxLoopDims = 64;
static_assert(kMaxLoopDims >= kMaxTensorDims, "a kernel must take every tensor kiln can make");

// Per-call constants, already validated by the front end. A kernel converts the one it
// needs to its compute type once per call: float kernels read `f`, integer and bool
// kernels `i` (the bit pattern, so uint64 values survive), complex kernels `c`.
struct KernelScalar {
  double f = 0;
  int64_t i = 0;
  std::complex<double> c{};
};

struct KernelArgs {
  KernelScalar alpha;      // add: out = a + alpha * b
  KernelScalar beta;       // softplus: beta
  KernelScalar threshold;  // softplus: threshold
};

enum class UnaryOp : uint8_t {
  // Same dtype in and out.
  Abs,  // complex: writes the real dtype
  Neg,
  Sign,
  Square,           // x * x (pow(x, 2))
  Cube,             // x * x * x (pow(x, 3))
  Reciprocal,       // 1 / x
  ReciprocalSquare, // 1 / (x * x) (pow(x, -2))
  Sqrt,
  Rsqrt,
  Exp,
  Exp2,
  Expm1,
  Log,
  Log2,
  Log1p,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Silu,
  Gelu,      // x * Phi(x), exact
  GeluTanh,  // gelu(approximate="tanh")
  Softplus,  // log1p(exp(beta * x)) / beta, or x where beta * x > threshold
  Relu,
  Floor,
  Ceil,
  Round,  // half to even
  Trunc,
  BitwiseNot,
  // Bool out.
  LogicalNot,
  IsNan,
  IsInf,
  IsFinite,
};

enum class BinaryOp : uint8_t {
  // Same dtype in and out.
  Add,  // a + alpha * b
  Mul,
  Div,       // true division (floats and complex)
  DivTrunc,  // integers: throws ZeroDivisionError on b == 0
  DivFloor,
  Remainder,  // Python's: the sign of b
  Pow,
  Maximum,  // NaN propagates
  Minimum,
  Atan2,
  BitwiseAnd,
  BitwiseOr,
  BitwiseXor,
  LeftShift,
  RightShift,
  // Bool out (writes_bool relies on these coming last).
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  LogicalAnd,
  LogicalOr,
  LogicalXor,
};

enum class TernaryOp : uint8_t {
  Where,  // cond (read as bool bytes), a, b -> cond ? a : b
  Clamp,  // x, lo, hi -> min(max(x, lo), hi), NaN propagating
};

// Whether the op writes bool (one byte per element) rather than its compute dtype.
inline bool writes_bool(UnaryOp op) {
  return op == UnaryOp::LogicalNot || op == UnaryOp::IsNan || op == UnaryOp::IsInf || op == UnaryOp::IsFinite;
}
inline bool writes_bool(BinaryOp op) { return op >= BinaryOp::Eq; }

// out = op(inputs) elementwise. `out` is allocated and defines the shape; the inputs are
// already expanded to it (stride 0 where they broadcast). Inputs are read as `compute`
// (for Where, the condition as bool and a, b as `compute`, which may be any dtype: the
// kernel only moves bytes); the kernel writes `out_compute`.
struct UnaryProblem {
  UnaryOp op;
  DType compute;
  DType out_compute;
  const Tensor& out;
  const Tensor& in;
  const KernelArgs& args;
};

struct BinaryProblem {
  BinaryOp op;
  DType compute;
  DType out_compute;
  const Tensor& out;
  const Tensor& a;
  const Tensor& b;
  const KernelArgs& args;
};

struct TernaryProblem {
  TernaryOp op;
  DType compute;
  DType out_compute;
  const Tensor& out;
  const Tensor& a;
  const Tensor& b;
  const Tensor& c;
  const KernelArgs& args;
};

// out = up * silu(gate), with gate, up and out of one shape and `compute` float32 or
// float64 (narrow storage computes in float32).
struct SiluAndMulProblem {
  DType compute;
  const Tensor& out;
  const Tensor& gate;
  const Tensor& up;
};

struct ElementwiseKernels {
  // Whether the device has a kernel for op on `compute`: front ends ask before they
  // allocate, so an unsupported dtype is their error, worded as PyTorch's.
  bool (*supports_unary)(UnaryOp op, DType compute) = nullptr;
  bool (*supports_binary)(BinaryOp op, DType compute) = nullptr;
  bool (*supports_ternary)(TernaryOp op, DType compute) = nullptr;
  // Results do not depend on the thread count.
  void (*unary)(const ExecutionContext& ctx, const UnaryProblem& p) = nullptr;
  void (*binary)(const ExecutionContext& ctx, const BinaryProblem& p) = nullptr;
  void (*ternary)(const ExecutionContext& ctx, const TernaryProblem& p) = nullptr;
  void (*silu_and_mul)(const ExecutionContext& ctx, const SiluAndMulProblem& p) = nullptr;
};

inline KernelTable<ElementwiseKernels> elementwise_kernels{"elementwise"};

}  // namespace kiln::backend
