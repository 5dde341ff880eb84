// Shared plumbing of the elementwise op front ends (internal): scalar operands,
// kernel lookup with PyTorch-style errors, running a kernel on the loop engine, and
// the checks of in-place ops.
#pragma once

#include <array>
#include <optional>

#include "backend/cpu/elementwise/elementwise_kernels.h"
#include "kiln/dtype.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln::elementwise {

// A Scalar as a 0-dim tensor of `dtype`, converted with kiln's cast rules (integers
// wrap), ready to take part in a kernel as a broadcast (stride 0) operand.
Tensor scalar_operand(const Scalar& value, DType dtype);

// The scalar as every kind of kernel reads it (see cpu::KernelScalar).
cpu::KernelScalar kernel_scalar(const Scalar& value);
// -value, wrapping for integers (so -INT64_MIN stays INT64_MIN, as modular arithmetic needs).
cpu::KernelScalar negated(const cpu::KernelScalar& value);

// Throws when `value` does not fit integer dtype `dtype` (PyTorch's checked
// Scalar::to<T>(): "value cannot be converted to type uint8 without overflow"; an
// unsigned dtype takes negatives down to -max, which wrap). No-op for other dtypes.
void check_scalar_fits(const char* op, const Scalar& value, DType dtype);


// The kernel for op on `compute` arrays; throws for a dtype the op does not support:
// NotImplemented for complex, Type otherwise (`dtype` is the user-visible one).
cpu::UnaryKernel require_kernel(const char* op, cpu::UnaryOp kop, DType compute, DType dtype);
cpu::BinaryKernel require_kernel(const char* op, cpu::BinaryOp kop, DType compute, DType dtype);
cpu::TernaryKernel require_kernel(const char* op, cpu::TernaryOp kop, DType compute, DType dtype);

// Type error unless `dtype` is floating (or complex when allow_complex).
void check_floating(const char* op, DType dtype, bool allow_complex = false);
// NotImplemented error for a complex dtype.
void check_not_complex(const char* op, DType dtype);

// Runs the kernel over `out` (already allocated; it defines the shape). Inputs are
// broadcast to out's shape and handed to the kernel as contiguous arrays of
// `in_compute`; the kernel writes `out_compute`, which the engine casts to out's dtype.
void run_unary(const Tensor& out, DType out_compute, const Tensor& in, DType in_compute, cpu::UnaryKernel kernel,
               const cpu::KernelArgs& args = {});
void run_binary(const Tensor& out, DType out_compute, const Tensor& a, const Tensor& b, DType in_compute,
                cpu::BinaryKernel kernel, const cpu::KernelArgs& args = {});
void run_ternary(const Tensor& out, DType out_compute, const Tensor& a, const Tensor& b, const Tensor& c,
                 const std::array<DType, 3>& in_compute, cpu::TernaryKernel kernel,
                 const cpu::KernelArgs& args = {});

// torch.can_cast: the in-place result-type rule (no complex -> real, no float ->
// integer, nothing but bool -> bool).
bool can_cast(DType from, DType to);

// The checks of an in-place op writing `self` from `other`: the result dtype must be
// castable to self's, the broadcast shape must be self's, self must not have
// overlapping elements, and other must not partially overlap self. PyTorch's wording.
void check_inplace(const char* op, const Tensor& self, const Tensor& other, DType result);

}  // namespace kiln::elementwise
