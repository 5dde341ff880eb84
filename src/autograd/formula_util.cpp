// Helpers of the backward formulas (autograd/formula_util.h) and the recorded conj.
#include "autograd/formula_util.h"

#include <algorithm>

#include "autograd/function.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/shape.h"

namespace kiln::autograd {

namespace {

DType real_dtype_of(DType complex) { return complex == DType::Complex64 ? DType::Float32 : DType::Float64; }

// The [..., 2] float view of a complex tensor's storage (torch.view_as_real).
Tensor real_view(const Tensor& t) {
  Shape sizes = t.sizes(), strides = t.strides();
  for (int64_t& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  return Tensor::from_storage(t.storage(), sizes, strides, t.storage_offset() * 2, real_dtype_of(t.dtype()));
}

}  // namespace

bool is_expandable_to(const Shape& shape, const Shape& target) {
  if (shape.size() > target.size()) return false;
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != target[lead + i] && shape[i] != 1) return false;
  }
  return true;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  DimList dims;
  for (int64_t i = 0; i < g.dim(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && g.size(i) != 1)) dims.push_back(i);
  }
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  return r.reshape(shape);
}

Tensor real_part(const Tensor& t) {
  if (!is_complex(t.dtype())) return t;
  return real_view(t.detach()).select(-1, 0).contiguous().clone();
}

Tensor conj(const Tensor& t) {
  if (!is_complex(t.dtype())) return t;
  Tensor out = below_autograd([&] {
    Tensor c = t.clone();
    Tensor imag = real_view(c).select(-1, 1);
    mul_(imag, Scalar(-1.0));
    return c;
  });
  return record("ConjBackward0", {t}, out, {}, [](BackwardContext& c) { return std::vector<Tensor>{conj(c.grad())}; });
}

std::vector<int64_t> reduced_dims(const DimList& dims, int64_t ndim) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, std::max<int64_t>(ndim, 1), "backward"));
  std::sort(out.begin(), out.end());
  if (ndim == 0) out.clear();
  return out;
}

Tensor keep_reduced(const Tensor& t, const Shape& input_sizes, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim || input_sizes.empty()) return t;
  Tensor r = t;
  for (int64_t d : dims) r = r.unsqueeze(d);
  return r;
}

Tensor expand_reduced(const Tensor& g, const Shape& input_sizes, const std::vector<int64_t>& dims, bool keepdim) {
  return keep_reduced(g, input_sizes, dims, keepdim).expand(input_sizes);
}

Tensor embed_along(const Tensor& g, const Shape& sizes, int64_t dim, int64_t start) {
  const int64_t after = sizes[dim] - start - g.size(dim);
  std::vector<Tensor> parts;
  if (start > 0) {
    Shape s = sizes;
    s[dim] = start;
    parts.push_back(zeros(s, g.dtype()));
  }
  parts.push_back(g);
  if (after > 0) {
    Shape s = sizes;
    s[dim] = after;
    parts.push_back(zeros(s, g.dtype()));
  }
  return parts.size() == 1 ? g : cat(parts, dim);
}

Tensor mul_conj(const Tensor& g, const Tensor& t) { return mul(g, conj(t)); }

Tensor zeros_of(const Tensor& t) { return zeros(t.sizes(), t.dtype()); }

Tensor as_view_of(const Tensor& base, Tensor view) {
  AutogradMeta* meta = view.autograd_meta();
  if (meta == nullptr || meta->grad_fn == nullptr) return view;
  const AutogradMeta* base_meta = base.autograd_meta();
  meta->view_base = base_meta != nullptr && base_meta->view_base.defined() ? base_meta->view_base : base;
  return view;
}

}  // namespace kiln::autograd
