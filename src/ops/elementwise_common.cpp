#include "ops/elementwise_common.h"

#include "core/memory_overlap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/op_profile.h"
#include "core/scalar_convert.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/context.h"
#include "kiln/type_promotion.h"
#include "ops/op_utils.h"

namespace kiln::elementwise {

// Unchecked: the caller checks what PyTorch checks (check_scalar_fits); a float scalar
// past a narrow dtype's range becomes inf there as in PyTorch (f16 x * 1e6).
Tensor scalar_operand(const Scalar& value, DType dtype) { return Tensor::from_scalar(value).to(dtype); }

backend::KernelScalar kernel_scalar(const Scalar& value) {
  backend::KernelScalar k;
  k.f = value.to_double();
  k.i = value.tag() == Scalar::Tag::UInt ? static_cast<int64_t>(value.to_uint64()) : value.to_int64();
  k.c = value.to_complex();
  return k;
}

backend::KernelScalar negated(const backend::KernelScalar& value) {
  backend::KernelScalar k;
  k.f = -value.f;
  k.i = static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(value.i));
  k.c = -value.c;
  return k;
}

void check_scalar_fits(const char* op, const Scalar& value, DType dtype) {
  // A float scalar cannot reach an integer result (promotion makes it float), except
  // through alpha, which add rejects before this; int64 holds every integral Scalar but
  // UInt, which promotes to uint64.
  if (!value.is_integral() || !is_integral(dtype) || dtype == DType::Int64) return;
  if (!scalar_fits(value, dtype)) {
    fail(ErrorKind::Runtime, op, "value cannot be converted to type {} without overflow: {}", dtype_name(dtype),
         value.str());
  }
}

namespace {

void check_supported(bool supported, const char* op, DType dtype) {
  if (supported) return;
  if (is_complex(dtype)) fail(ErrorKind::NotImplemented, op, "not implemented for complex tensors (got {})", dtype_name(dtype));
  fail(ErrorKind::Type, op, "not supported for {} tensors", dtype_name(dtype));
}

const backend::ElementwiseKernels& kernels_on(Device device, const char* op) {
  return backend::elementwise_kernels.on(device, op);
}

}  // namespace

// A device's kernels may lack an op the CPU has: that is the device's gap, not the dtype's.
void check_device_supports(bool supported, const char* op, Device device, DType dtype) {
  if (supported || device.type == DeviceType::CPU) return;
  fail(ErrorKind::NotImplemented, op, "no {} kernel for {} tensors yet (docs/gpu.md lists what runs there)",
       device_type_name(device.type), dtype_name(dtype));
}

void require_kernel(const char* op, Device device, backend::UnaryOp kop, DType compute, DType dtype) {
  const bool supported = kernels_on(device, op).supports_unary(kop, compute);
  check_device_supports(supported, op, device, dtype);
  check_supported(supported, op, dtype);
}
void require_kernel(const char* op, Device device, backend::BinaryOp kop, DType compute, DType dtype) {
  const bool supported = kernels_on(device, op).supports_binary(kop, compute);
  check_device_supports(supported, op, device, dtype);
  check_supported(supported, op, dtype);
}
void require_kernel(const char* op, Device device, backend::TernaryOp kop, DType compute, DType dtype) {
  const bool supported = kernels_on(device, op).supports_ternary(kop, compute);
  check_device_supports(supported, op, device, dtype);
  check_supported(supported, op, dtype);
}

void check_floating(const char* op, DType dtype, bool allow_complex) {
  if (is_floating(dtype) || (allow_complex && is_complex(dtype))) return;
  check_not_complex(op, dtype);
  fail(ErrorKind::Type, op, "expected a floating-point tensor, got {}", dtype_name(dtype));
}

void check_not_complex(const char* op, DType dtype) {
  if (is_complex(dtype)) fail(ErrorKind::NotImplemented, op, "not implemented for complex tensors (got {})", dtype_name(dtype));
}

void run_unary(const char* op, const Tensor& out, DType out_compute, const Tensor& in, DType in_compute,
               backend::UnaryOp kop, const backend::KernelArgs& args) {
  const Device device = common_device(op, {&out, &in});
  const auto kernel = kernels_on(device, op).unary;
  const Tensor x = on_device(in, device).expand(out.sizes());
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&in, &out}), 0}; });
  kernel(current_context(), {kop, in_compute, out_compute, out, x, args});
}

void run_binary(const char* op, const Tensor& out, DType out_compute, const Tensor& a, const Tensor& b,
                DType in_compute, backend::BinaryOp kop, const backend::KernelArgs& args) {
  const Device device = common_device(op, {&out, &a, &b});
  const auto kernel = kernels_on(device, op).binary;
  const Tensor x = on_device(a, device).expand(out.sizes());
  const Tensor y = on_device(b, device).expand(out.sizes());
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&a, &b, &out}), 0}; });
  kernel(current_context(), {kop, in_compute, out_compute, out, x, y, args});
}

void run_ternary(const char* op, const Tensor& out, DType out_compute, const Tensor& a, const Tensor& b,
                 const Tensor& c, DType in_compute, backend::TernaryOp kop, const backend::KernelArgs& args) {
  const Device device = common_device(op, {&out, &a, &b, &c});
  const auto kernel = kernels_on(device, op).ternary;
  const Tensor x = on_device(a, device).expand(out.sizes());
  const Tensor y = on_device(b, device).expand(out.sizes());
  const Tensor z = on_device(c, device).expand(out.sizes());
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&a, &b, &c, &out}), 0}; });
  kernel(current_context(), {kop, in_compute, out_compute, out, x, y, z, args});
}

bool can_cast(DType from, DType to) {
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating(from) && is_integral(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

void check_inplace(const char* op, const Tensor& self, const Tensor& other, DType result) {
  check_writable(self, op);
  check_inplace_source(other, op);
  if (!can_cast(result, self.dtype())) {
    fail(ErrorKind::Runtime, op, "result type {} can't be cast to the desired output type {}", torch_type_name(result),
         torch_type_name(self.dtype()));
  }
  const Shape shape = broadcast_shapes(self.sizes(), other.sizes(), op);
  if (shape != self.sizes()) {
    fail(ErrorKind::Runtime, op, "output with shape {} doesn't match the broadcast shape {}", self.shape_str(),
         shape_to_string(shape));
  }
  check_no_internal_overlap(self, op);
  check_no_partial_overlap(self, other, op);
}

}  // namespace kiln::elementwise
