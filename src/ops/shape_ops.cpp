// Front ends for joining and splitting: cat, stack, the split family, unbind, flip.
// Splits are pure views. cat copies each input into a slice of the output with
// Tensor::copy_, whose engine coalesces dims and moves contiguous runs with memcpy
// (casting on the fly when the input's dtype differs from the promoted one).
#include "kiln/ops/shape.h"

#include <algorithm>
#include <new>
#include <stdexcept>

#include "kiln/allocator.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/type_promotion.h"
#include "ops/autograd_hooks.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

// PyTorch's legacy cat rule: 1-D empty tensors are ignored whatever the other shapes.
bool cat_skips(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

// An empty list with room for `count` items (views, or sizes). The count is a size (a
// dim of an expanded view may be 2^40 long): a list memory cannot hold is kiln's
// out-of-memory error, not a bare std::bad_alloc or std::length_error. Lists past
// kiln's allocation limit fail without asking the system (see allocator.h).
template <typename T>
std::vector<T> reserved_list(int64_t count, const char* op) {
  size_t bytes = 0;
  if (!checked_mul(static_cast<size_t>(count), sizeof(T), &bytes) || bytes > kMaxAllocationBytes) {
    fail(ErrorKind::Runtime, op, "not enough memory for a list of {} pieces", count);
  }
  std::vector<T> out;
  try {
    out.reserve(static_cast<size_t>(count));
  } catch (const std::bad_alloc&) {
    fail(ErrorKind::Runtime, op, "not enough memory for a list of {} pieces", count);
  } catch (const std::length_error&) {
    fail(ErrorKind::Runtime, op, "not enough memory for a list of {} pieces", count);
  }
  return out;
}

DType promoted_dtype(const std::vector<Tensor>& tensors) {
  DType dt = tensors[0].dtype();
  for (size_t i = 1; i < tensors.size(); ++i) dt = promote_types(dt, tensors[i].dtype());
  return dt;
}

// The device every tensor of the list is on (PyTorch's error when they differ).
Device list_device(const std::vector<Tensor>& tensors, const char* op) {
  for (const Tensor& t : tensors) common_device(op, {&tensors.front(), &t});
  return tensors.front().device();
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_AUTOGRAD(cat, tensors, dim);
  KILN_CHECK_KIND(!tensors.empty(), Value, "cat", "expected a non-empty list of Tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "cat", "tensor at position {} is undefined", i);
    KILN_CHECK(tensors[i].dim() > 0, "cat", "zero-dimensional tensor (at position {}) cannot be concatenated", i);
  }
  const DType out_dtype = promoted_dtype(tensors);

  // The first input that is not skipped fixes the rank and the sizes outside `dim`.
  const Tensor* ref = nullptr;
  size_t ref_index = 0;
  for (size_t i = 0; i < tensors.size() && !ref; ++i) {
    if (!cat_skips(tensors[i])) {
      ref = &tensors[i];
      ref_index = i;
    }
  }
  if (!ref) {
    wrap_dim(dim, 1, "cat");
    return Tensor::empty({0}, out_dtype, kCPU, "cat");
  }
  const int64_t ndim = ref->dim();
  dim = wrap_dim(dim, ndim, "cat");

  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (cat_skips(t)) continue;
    KILN_CHECK(t.dim() == ndim, "cat", "Tensors must have same number of dimensions: got {} and {}", ndim, t.dim());
    for (int64_t d = 0; d < ndim; ++d) {
      if (d == dim) continue;
      KILN_CHECK(t.size(d) == ref->size(d), "cat",
                 "Sizes of tensors must match except in dimension {}. Expected size {} but got size {} for "
                 "tensor number {} in the list (shapes {} at position {} and {} at position {}).",
                 dim, ref->size(d), t.size(d), i, ref->shape_str(), ref_index, t.shape_str(), i);
    }
    // Expanded views may each be near INT64_MAX long.
    if (!checked_add(total, t.size(dim), &total)) {
      fail(ErrorKind::Runtime, "cat", "the concatenated size along dimension {} does not fit in int64", dim);
    }
  }

  Shape out_shape = ref->sizes();
  out_shape[dim] = total;
  Tensor out = Tensor::empty(out_shape, out_dtype, list_device(tensors, "cat"), "cat");
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (cat_skips(t)) continue;
    const int64_t len = t.size(dim);
    if (len > 0) out.narrow(dim, offset, len).copy_(t);
    offset += len;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_AUTOGRAD(stack, tensors, dim);
  KILN_CHECK_KIND(!tensors.empty(), Value, "stack", "stack expects a non-empty TensorList");
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].defined(), "stack", "tensor at position {} is undefined", i);
  }
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].sizes() == first.sizes(), "stack",
               "stack expects each tensor to be equal size, but got {} at entry 0 and {} at entry {}",
               first.shape_str(), tensors[i].shape_str(), i);
  }
  dim = wrap_dim(dim, first.dim() + 1, "stack");
  Shape out_shape = first.sizes();
  out_shape.insert(out_shape.begin() + dim, static_cast<int64_t>(tensors.size()));
  Tensor out = Tensor::empty(out_shape, promoted_dtype(tensors), list_device(tensors, "stack"), "stack");
  for (size_t i = 0; i < tensors.size(); ++i) out.select(dim, static_cast<int64_t>(i)).copy_(tensors[i]);
  return out;
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  check_defined(t, "split", "self");
  KILN_CHECK(t.dim() > 0, "split", "split expects at least a 1-dimensional tensor");
  KILN_CHECK_KIND(split_size >= 0, Value, "split", "split expects split_size be non-negative, but got split_size={}",
                  split_size);
  dim = wrap_dim(dim, t.dim(), "split");
  const int64_t dim_size = t.size(dim);
  KILN_CHECK(split_size != 0 || dim_size == 0, "split",
             "split_size can only be 0 if dimension size is 0, but got dimension size of {}", dim_size);
  const int64_t num_splits =
      split_size == 0 ? 1 : std::max<int64_t>(ceil_div(dim_size, split_size), 1);
  std::vector<Tensor> out = reserved_list<Tensor>(num_splits, "split");
  for (int64_t i = 0; i < num_splits; ++i) {
    const int64_t start = i * split_size;
    out.push_back(t.narrow(dim, start, std::min(split_size, dim_size - start)));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& t, const std::vector<int64_t>& split_sizes, int64_t dim) {
  check_defined(t, "split_with_sizes", "self");
  KILN_CHECK(t.dim() > 0, "split_with_sizes", "split expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, t.dim(), "split_with_sizes");
  const int64_t dim_size = t.size(dim);
  int64_t sum = 0;
  bool overflow = false;  // a wrapped sum could match dim_size; past int64 it matches nothing
  for (int64_t s : split_sizes) {
    KILN_CHECK_KIND(s >= 0, Value, "split_with_sizes",
                    "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={}",
                    shape_to_string(split_sizes));
    overflow |= !checked_add(sum, s, &sum);
  }
  KILN_CHECK_KIND(!overflow && sum == dim_size, Value, "split_with_sizes",
                  "split_with_sizes expects split_sizes to sum exactly to {} (input tensor's size at dimension "
                  "{}), but got split_sizes={}",
                  dim_size, dim, shape_to_string(split_sizes));
  std::vector<Tensor> out;
  out.reserve(split_sizes.size());
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    out.push_back(t.narrow(dim, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim) {
  check_defined(t, "chunk", "self");
  KILN_CHECK(t.dim() > 0, "chunk", "chunk expects at least a 1-dimensional tensor");
  KILN_CHECK_KIND(chunks > 0, Value, "chunk", "chunk expects `chunks` to be greater than 0, got: {}", chunks);
  dim = wrap_dim(dim, t.dim(), "chunk");
  const int64_t dim_size = t.size(dim);
  const int64_t split_size = ceil_div(dim_size, chunks);
  // split() cannot express "`chunks` empty pieces" (any number of them sums to 0), so an
  // empty dim goes through split_with_sizes, as PyTorch does.
  if (dim_size == 0) {
    std::vector<int64_t> empty_pieces = reserved_list<int64_t>(chunks, "chunk");
    empty_pieces.resize(static_cast<size_t>(chunks), 0);
    return split_with_sizes(t, empty_pieces, dim);
  }
  return split(t, split_size, dim);
}

std::vector<Tensor> tensor_split(const Tensor& t, int64_t sections, int64_t dim) {
  check_defined(t, "tensor_split", "self");
  KILN_CHECK(t.dim() > 0, "tensor_split",
             "tensor_split expected at least a 1-dimensional tensor, but got a tensor with {} dims", t.dim());
  KILN_CHECK_KIND(sections > 0, Value, "tensor_split", "number of sections must be larger than 0, got {}", sections);
  dim = wrap_dim(dim, t.dim(), "tensor_split");
  const int64_t dim_size = t.size(dim);
  const int64_t base = dim_size / sections;
  const int64_t longer = dim_size % sections;
  std::vector<Tensor> out = reserved_list<Tensor>(sections, "tensor_split");
  int64_t start = 0;
  for (int64_t i = 0; i < sections; ++i) {
    const int64_t len = base + (i < longer ? 1 : 0);
    out.push_back(t.narrow(dim, start, len));
    start += len;
  }
  return out;
}

std::vector<Tensor> tensor_split_indices(const Tensor& t, const std::vector<int64_t>& indices, int64_t dim) {
  check_defined(t, "tensor_split", "self");
  KILN_CHECK(t.dim() > 0, "tensor_split",
             "tensor_split expected at least a 1-dimensional tensor, but got a tensor with {} dims", t.dim());
  dim = wrap_dim(dim, t.dim(), "tensor_split");
  std::vector<Tensor> out;
  out.reserve(indices.size() + 1);
  int64_t start = 0;
  for (int64_t end : indices) {
    out.push_back(t.slice(dim, start, end));
    start = end;
  }
  out.push_back(t.slice(dim, start, std::nullopt));
  return out;
}

std::vector<Tensor> unbind(const Tensor& t, int64_t dim) {
  check_defined(t, "unbind", "self");
  KILN_CHECK_KIND(t.dim() > 0, Index, "unbind", "Dimension specified as {} but tensor has no dimensions", dim);
  dim = wrap_dim(dim, t.dim(), "unbind");
  std::vector<Tensor> out = reserved_list<Tensor>(t.size(dim), "unbind");
  for (int64_t i = 0; i < t.size(dim); ++i) out.push_back(t.select(dim, i));
  return out;
}

Tensor flip(const Tensor& t, const std::vector<int64_t>& dims) {
  KILN_AUTOGRAD(flip, t, dims);
  check_defined(t, "flip", "self");
  Shape strides = t.strides();
  int64_t offset = t.storage_offset();
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(t.dim(), 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, t.dim(), "flip");
    KILN_CHECK(!seen[w], "flip", "dim {} appears multiple times in the list of dims", w);
    seen[w] = true;
  }
  if (t.numel() == 0 || t.dim() == 0) return t.clone();
  // A view that walks each flipped dim backwards (negative stride from its last
  // element); clone() then copies it out in order.
  // A one-element dim is left as it is: flipping it changes nothing, and its stride may
  // be anything (INT64_MIN has no negation).
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (!seen[d] || t.size(d) == 1) continue;
    offset += (t.size(d) - 1) * strides[d];
    strides[d] = -strides[d];
  }
  return t.as_strided(t.sizes(), strides, offset).clone();
}

}  // namespace kiln
