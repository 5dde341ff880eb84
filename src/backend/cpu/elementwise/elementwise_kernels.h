// The CPU elementwise kernels behind include/kiln/ops/elementwise.h (internal).
//
// A kernel works on plain contiguous arrays of one compute dtype, as the loop engine
// (loops.h) hands them over: f32 for f16/bf16/fp8 storage, f64, native integers and
// bool (one byte, 0 or 1), std::complex<float|double>. Comparisons, logical ops and
// isnan/isinf/isfinite write bool; complex abs writes the real dtype; everything else
// writes the compute dtype of its inputs. The table entries (register.cpp) look a kernel
// up once per op call (never a per-element switch) and run it chunk by chunk.
//
// Float32/float64 kernels are Highway SIMD, compiled per target and picked at run time
// at lookup, except those PyTorch defines by a C library function (fmod-based floor
// division and remainder, float64 pow, atan2), which loop over it. Integer, bool and
// complex kernels are plain loops the compiler vectorises.
#pragma once

#include <cstdint>

#include "backend/elementwise.h"
#include "kiln/dtype.h"

namespace kiln::cpu {

using backend::BinaryOp;
using backend::KernelArgs;
using backend::KernelScalar;
using backend::TernaryOp;
using backend::UnaryOp;
using backend::writes_bool;

using UnaryKernel = void (*)(char* out, const char* in, int64_t n, const KernelArgs& args);
using BinaryKernel = void (*)(char* out, const char* a, const char* b, int64_t n, const KernelArgs& args);
using TernaryKernel = void (*)(char* out, const char* a, const char* b, const char* c, int64_t n,
                               const KernelArgs& args);

// Per family (defined in the *_kernels*.cpp files; unary_kernel() and friends below
// route by dtype). Each returns nullptr for an op or dtype it does not implement.
UnaryKernel float_unary_basic_kernel(UnaryOp op, DType compute);  // f32/f64, SIMD
UnaryKernel float_unary_math_kernel(UnaryOp op, DType compute);   // f32/f64, SIMD
BinaryKernel float_binary_kernel(BinaryOp op, DType compute);     // f32/f64, SIMD + loops
TernaryKernel float_ternary_kernel(TernaryOp op, DType compute);  // f32/f64 clamp
UnaryKernel integer_unary_kernel(UnaryOp op, DType compute);      // bool and integers
BinaryKernel integer_binary_kernel(BinaryOp op, DType compute);
TernaryKernel integer_ternary_kernel(TernaryOp op, DType compute);
UnaryKernel complex_unary_kernel(UnaryOp op, DType compute);
BinaryKernel complex_binary_kernel(BinaryOp op, DType compute);
BinaryKernel predicate_binary_kernel(BinaryOp op, DType compute);  // comparisons, logical ops
UnaryKernel predicate_unary_kernel(UnaryOp op, DType compute);     // isnan, logical_not, ...
TernaryKernel where_kernel(DType compute);

// The Highway targets (HWY_* bits) the SIMD kernels were compiled for; tests pin each.
int64_t elementwise_simd_targets();

// The kernel for `op` on arrays of `compute` dtype (a compute dtype: never f16, bf16
// or fp8), or nullptr when the op is not defined for that dtype. For Where, `compute`
// is the dtype of a and b (any dtype: the kernel only moves bytes).
inline UnaryKernel unary_kernel(UnaryOp op, DType compute) {
  if (writes_bool(op)) return predicate_unary_kernel(op, compute);
  if (compute == DType::Float32 || compute == DType::Float64) {
    if (UnaryKernel k = float_unary_basic_kernel(op, compute)) return k;
    return float_unary_math_kernel(op, compute);
  }
  if (is_complex(compute)) return complex_unary_kernel(op, compute);
  return integer_unary_kernel(op, compute);
}

inline BinaryKernel binary_kernel(BinaryOp op, DType compute) {
  if (writes_bool(op)) return predicate_binary_kernel(op, compute);
  if (compute == DType::Float32 || compute == DType::Float64) return float_binary_kernel(op, compute);
  if (is_complex(compute)) return complex_binary_kernel(op, compute);
  return integer_binary_kernel(op, compute);
}

inline TernaryKernel ternary_kernel(TernaryOp op, DType compute) {
  if (op == TernaryOp::Where) return where_kernel(compute);
  if (compute == DType::Float32 || compute == DType::Float64) return float_ternary_kernel(op, compute);
  return integer_ternary_kernel(op, compute);
}

}  // namespace kiln::cpu
