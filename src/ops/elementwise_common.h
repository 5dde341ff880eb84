// Shared plumbing of the elementwise op front ends (internal): scalar operands,
// kernel checks with PyTorch-style errors, running an op through the elementwise
// kernel table (backend/elementwise.h), and the checks of in-place ops.
#pragma once

#include <optional>

#include "backend/elementwise.h"
#include "kiln/dtype.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln::elementwise {

// A Scalar as a 0-dim tensor of `dtype`, converted with kiln's cast rules (integers
// wrap), ready to take part in a kernel as a broadcast (stride 0) operand.
Tensor scalar_operand(const Scalar& value, DType dtype);

// The scalar as every kind of kernel reads it (see backend::KernelScalar).
backend::KernelScalar kernel_scalar(const Scalar& value);
// -value, wrapping for integers (so -INT64_MIN stays INT64_MIN, as modular arithmetic needs).
backend::KernelScalar negated(const backend::KernelScalar& value);

// Throws when `value` does not fit integer dtype `dtype` (PyTorch's checked
// Scalar::to<T>(): "value cannot be converted to type uint8 without overflow"; an
// unsigned dtype takes negatives down to -max, which wrap). No-op for other dtypes.
void check_scalar_fits(const char* op, const Scalar& value, DType dtype);


// Throws unless `device` has a kernel for op on `compute` arrays: NotImplemented for
// complex, Type otherwise (`dtype` is the user-visible one).
void require_kernel(const char* op, Device device, backend::UnaryOp kop, DType compute, DType dtype);
void require_kernel(const char* op, Device device, backend::BinaryOp kop, DType compute, DType dtype);
void require_kernel(const char* op, Device device, backend::TernaryOp kop, DType compute, DType dtype);

// Type error unless `dtype` is floating (or complex when allow_complex).
void check_floating(const char* op, DType dtype, bool allow_complex = false);
// NotImplemented error for a complex dtype.
void check_not_complex(const char* op, DType dtype);

// Runs op `kop` (checked with require_kernel first) over `out`, already allocated: it
// defines the shape. Inputs are broadcast to out's shape and read as `in_compute` (for
// Where, the condition as bool); the kernel writes `out_compute`, cast to out's dtype.
void run_unary(const char* op, const Tensor& out, DType out_compute, const Tensor& in, DType in_compute,
               backend::UnaryOp kop, const backend::KernelArgs& args = {});
void run_binary(const char* op, const Tensor& out, DType out_compute, const Tensor& a, const Tensor& b,
                DType in_compute, backend::BinaryOp kop, const backend::KernelArgs& args = {});
void run_ternary(const char* op, const Tensor& out, DType out_compute, const Tensor& a, const Tensor& b,
                 const Tensor& c, DType in_compute, backend::TernaryOp kop, const backend::KernelArgs& args = {});

// torch.can_cast: the in-place result-type rule (no complex -> real, no float ->
// integer, nothing but bool -> bool).
bool can_cast(DType from, DType to);

// The checks of an in-place op writing `self` from `other`: self must be writable
// (check_writable), the result dtype must be
// castable to self's, the broadcast shape must be self's, self must not have
// overlapping elements, and other must not partially overlap self. PyTorch's wording.
void check_inplace(const char* op, const Tensor& self, const Tensor& other, DType result);

}  // namespace kiln::elementwise
