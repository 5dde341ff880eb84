// Tensor methods that move or convert data: contiguous, clone, to, copy_, fill_,
// and element access for printing. Each ends in the copy family of the kernel table.
#include <complex>

#include <fmt/core.h>

#include "core/autograd_meta.h"
#include "core/copy_kernels.h"
#include "core/memory_overlap.h"
#include "core/op_profile.h"
#include "core/scalar_convert.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {

namespace {

void copy_on_device(const char* op, const Tensor& dst, const Tensor& src) {
  KILN_CHECK(dst.device() == src.device(), op, "expected both tensors on one device, got {} and {}",
             dst.device().str(), src.device().str());
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&dst, &src}), 0}; });
  copy_kernels.on(dst.device(), op).copy(current_context(), dst, src);
}

}  // namespace

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  const char* op = "to";
  const Tensor src = contiguous();
  if (target.type != DeviceType::CPU && device().type != DeviceType::CPU) return src.to(kCPU).to(target);
  Tensor out = Tensor::empty(sizes(), dtype(), target, op);
  if (numel() == 0) return out;
  if (target.type == DeviceType::CPU) {
    require_kernel(copy_kernels.on(device(), op).download, device(), op)(current_context(), out, src);
  } else {
    require_kernel(copy_kernels.on(target, op).upload, target, op)(current_context(), out, src);
  }
  return out;
}

Tensor Tensor::clone() const {
  KILN_TENSOR_METHOD_AUTOGRAD(clone);
  Tensor out = Tensor::empty(sizes(), dtype(), device(), "clone");
  copy_on_device("clone", out, *this);
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  // A copy: while gradients are recorded it is clone's node (PyTorch's contiguous is a
  // clone); otherwise its own name in errors.
  KILN_TENSOR_METHOD_AUTOGRAD(clone);
  Tensor out = Tensor::empty(sizes(), dtype(), device(), "contiguous");
  copy_on_device("contiguous", out, *this);
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  KILN_TENSOR_METHOD_AUTOGRAD(to, target);
  Tensor out = Tensor::empty(sizes(), target, device(), "to");
  copy_on_device("to", out, *this);
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  KILN_CHECK(src.defined(), "copy_", "source tensor is undefined");
  // Under autograd the old value's gradient is zero and src's is the gradient, cast and
  // summed back to src's shape (PyTorch's CopyBackwards).
  KILN_INPLACE_AUTOGRAD(
      "copy_", *this, &src, [&] { copy_(src); }, [&](const Tensor&) { return src.to(dtype()).expand(sizes()); });
  // Across devices (PyTorch allows it): a host source is converted to this dtype on the
  // host first, so every conversion the CPU has works (fill_ of a device tensor included).
  // The same-device copy_ it ends in checks the destination and counts the write, once.
  if (src.device() != device()) {
    return copy_(src.device().type == DeviceType::CPU ? src.to(dtype()).to(device()) : src.to(device()));
  }
  // PyTorch's rules: copying a view onto itself is a no-op; a destination whose elements
  // share memory, or a source that partly overlaps it, would depend on the write order.
  check_writable(*this, "copy_");
  check_inplace_source(src, "copy_");
  const bool same_view = data_ptr() == src.data_ptr() && sizes() == src.sizes() && strides() == src.strides() &&
                         dtype() == src.dtype();
  if (same_view) return *this;
  check_no_internal_overlap(*this, "copy_");
  check_no_partial_overlap(*this, src, "copy_");
  copy_on_device("copy_", *this, src.expand(sizes()));
  return *this;
}

Tensor Tensor::from_scalar(const Scalar& value) {
  Tensor t;
  switch (value.tag()) {
    case Scalar::Tag::Bool:
      t = Tensor::empty({}, DType::Bool);
      *t.data<uint8_t>() = value.to_bool();
      break;
    case Scalar::Tag::Int:
      t = Tensor::empty({}, DType::Int64);
      *t.data<int64_t>() = value.to_int64();
      break;
    case Scalar::Tag::UInt:
      t = Tensor::empty({}, DType::UInt64);
      *t.data<uint64_t>() = value.to_uint64();
      break;
    case Scalar::Tag::Double:
      t = Tensor::empty({}, DType::Float64);
      *t.data<double>() = value.to_double();
      break;
    case Scalar::Tag::Complex:
      t = Tensor::empty({}, DType::Complex128);
      *t.data<std::complex<double>>() = value.to_complex();
      break;
  }
  return t;
}

Tensor& Tensor::fill_(const Scalar& value) {
  // Under autograd: a constant, so the old value's gradient is zero.
  KILN_INPLACE_AUTOGRAD(
      "fill_", *this, nullptr, [&] { fill_(value); }, [&](const Tensor&) { return Tensor(); });
  check_writable(*this, "fill_");
  // PyTorch's checked conversion: 300 does not fit uint8, nor 1j float32 (it raises
  // rather than wrapping or dropping the 1j).
  check_scalar_converts(value, dtype(), "fill_");
  return copy_(from_scalar(value));
}

Scalar Tensor::item() const {
  KILN_CHECK(numel() == 1, "item", "a Tensor with {} elements cannot be converted to Scalar", numel());
  return at(Shape(dim(), 0));
}

Scalar Tensor::at(const Shape& index) const {
  KILN_CHECK_KIND(static_cast<int64_t>(index.size()) == dim(), Index, "at", "expected {} indices, got {}",
                  dim(), index.size());
  int64_t offset = 0;
  for (int64_t d = 0; d < dim(); ++d) {
    int64_t i = index[d];
    KILN_CHECK_KIND(i >= 0 && i < sizes()[d], Index, "at", "index {} is out of bounds for dimension {} with size {}",
                    i, d, sizes()[d]);
    offset += i * strides()[d];
  }
  // Device memory is not host memory: the one element comes over first.
  if (device().type != DeviceType::CPU) {
    copy_kernels.on(device(), "item");  // a device without copies is named as item's error
    return as_strided({}, {}, storage_offset() + offset).to(kCPU).at({});
  }
  const char* p = static_cast<const char*>(data_ptr()) + offset * static_cast<int64_t>(element_size());
  const auto cast = copy_kernels.on(device(), "item").cast_elements;
  switch (dtype_kind(dtype())) {
    case DTypeKind::Bool: {
      bool v;
      cast(dtype(), p, 0, DType::Bool, &v, 0, 1);
      return Scalar(v);
    }
    case DTypeKind::Unsigned: {
      uint64_t v;
      cast(dtype(), p, 0, DType::UInt64, &v, 0, 1);
      return Scalar(v);
    }
    case DTypeKind::Signed: {
      int64_t v;
      cast(dtype(), p, 0, DType::Int64, &v, 0, 1);
      return Scalar(v);
    }
    case DTypeKind::Float: {
      double v;
      cast(dtype(), p, 0, DType::Float64, &v, 0, 1);
      return Scalar(v);
    }
    case DTypeKind::Complex: {
      std::complex<double> v;
      cast(dtype(), p, 0, DType::Complex128, &v, 0, 1);
      return Scalar(v);
    }
  }
  return Scalar();
}

namespace {

void print_recursive(const Tensor& t, Shape& index, std::string& out) {
  int64_t d = static_cast<int64_t>(index.size());
  if (d == t.dim()) {
    Scalar v = t.at(index);
    // Narrower floats print at their own precision (shortest round-trip form).
    if (v.is_floating() && t.dtype() != DType::Float64) {
      out += fmt::format("{}", static_cast<float>(v.to_double()));
    } else {
      out += v.str();
    }
    return;
  }
  out += "[";
  int64_t n = t.size(d);
  constexpr int64_t kEdge = 3;  // numpy-style summarisation of long dims
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * kEdge + 1 && i == kEdge) {
      out += "..., ";
      i = n - kEdge - 1;
      continue;
    }
    index.push_back(i);
    print_recursive(t, index, out);
    index.pop_back();
    if (i + 1 < n) out += ", ";
  }
  out += "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  if (device().type != DeviceType::CPU) {
    std::string host = to(kCPU).str();
    return host.substr(0, host.size() - 1) + ", device=" + device().str() + ")";
  }
  std::string out = "tensor(";
  Shape index;
  print_recursive(*this, index, out);
  out += ", shape=" + shape_str() + ", dtype=" + std::string(dtype_name(dtype())) + ")";
  return out;
}

}  // namespace kiln
