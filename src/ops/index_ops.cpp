// Front ends for the indexing ops: PyTorch's checks and error messages, output
// allocation, then one call through the index kernel table (backend/index.h).
#include "kiln/ops/index.h"

#include <cmath>
#include <limits>
#include <new>
#include <stdexcept>

#include "backend/index.h"
#include "core/addable_dtype.h"
#include "kiln/context.h"
#include "core/memory_overlap.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/type_promotion.h"
#include "ops/autograd_hooks.h"
#include "core/scalar_convert.h"
#include "ops/fill_value.h"
#include "ops/op_utils.h"
#include "ops/out_checks.h"
#include "kiln/ops/out_variants.h"

namespace kiln {

namespace {

void check_index_dtype(const Tensor& index, const char* op) {
  KILN_CHECK_KIND(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, Type, op,
                  "Expected dtype int32 or int64 for index, got {}", dtype_name(index.dtype()));
}

void check_rank(const Tensor& t, const char* op) {
  KILN_CHECK(t.dim() <= backend::kMaxLoopDims, op, "tensors with more than {} dims are not supported (got {})",
             backend::kMaxLoopDims, t.dim());
}

// 0-dim tensors act as 1-D of one element in gather/scatter (PyTorch's ensure_nonempty_dim).
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

const backend::IndexKernels& kernels_on(const Tensor& t, const char* op) {
  return backend::index_kernels.on(t.device(), op);
}

// The values of a 1-D or 0-D index tensor, each checked to lie in [0, size). Indices
// are never wrapped: PyTorch rejects negative ones in these ops.
std::vector<int64_t> read_rows(const ExecutionContext& ctx, const Tensor& index, int64_t size, const char* op) {
  // An expanded index can name more rows than memory holds (the output would be
  // larger still): say so with the op's name rather than a bare bad_alloc.
  const auto too_many = [&] {
    fail(ErrorKind::Runtime, op, "the index holds {} entries, more than memory can hold", index.numel());
  };
  std::vector<int64_t> rows;
  try {
    rows = kernels_on(index, op).index_values(ctx, index);
  } catch (const std::bad_alloc&) {
    too_many();
  } catch (const std::length_error&) {
    too_many();
  }
  for (int64_t v : rows) {
    KILN_CHECK_KIND(v >= 0 && v < size, Index, op,
                    "index out of range in self (index {} is not in [0, {}) for the indexed dimension)", v, size);
  }
  return rows;
}

Scalar value_from_tensor(const Tensor& value, const char* op) {
  check_defined(value, op, "value");
  KILN_CHECK(value.dim() == 0, op,
             "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
             value.dim());
  return value.item();
}

void check_bool_mask(const Tensor& mask, const char* op) {
  check_defined(mask, op, "mask");
  KILN_CHECK_KIND(mask.dtype() == DType::Bool, Type, op, "expected a bool mask, but got mask with dtype {}",
                  dtype_name(mask.dtype()));
}

}  // namespace

void check_fill_value(const Scalar& value, DType dt, const char* op) { check_scalar_converts(value, dt, op); }

namespace {

// index_select, into `into` when given (index_select_out).
Tensor index_select_impl(const char* op, const Tensor& input, int64_t dim, const Tensor& index, const Tensor* into) {
  check_defined(input, op, "input");
  check_defined(index, op, "index");
  common_device(op, {&input, &index});
  check_index_dtype(index, op);
  check_rank(input, op);
  KILN_CHECK_KIND(index.dim() <= 1, Index, op, "Index is supposed to be a vector, got {}-D index", index.dim());
  dim = wrap_dim(dim, input.dim(), op);
  const ExecutionContext ctx = current_context();
  if (input.dim() == 0) {
    KILN_CHECK_KIND(index.numel() == 1, Index, op, "Index to scalar can have only 1 value, got {} value(s)",
                    index.numel());
    read_rows(ctx, index, 1, op);
    if (into == nullptr) return input.clone();
    out_detail::check_out(op, *into, input.sizes(), input.dtype(), input.device(), {&input, &index});
    Tensor out = *into;
    out.copy_(input);
    return out;
  }
  // The output first: an expanded index of 2^40 entries is refused as the output it
  // asks for ("index_select: ... you tried to allocate"), before its entries are read.
  Shape out_shape = input.sizes();
  out_shape[dim] = index.numel();
  if (into != nullptr) out_detail::check_out(op, *into, out_shape, input.dtype(), input.device(), {&input, &index});
  Tensor out = into != nullptr ? *into : Tensor::empty(out_shape, input.dtype(), input.device(), op);
  const std::vector<int64_t> rows = read_rows(ctx, index, input.size(dim), op);
  kernels_on(input, op).index_select(ctx, {out, input, dim, rows});
  return out;
}

}  // namespace

Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index) {
  KILN_AUTOGRAD(index_select, input, dim, index);
  return index_select_impl("index_select", input, dim, index, nullptr);
}

void index_select_out(const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index) {
  index_select_impl("index_select_out", input, dim, index, &out);
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  KILN_AUTOGRAD(embedding, weight, indices, padding_idx);
  check_defined(weight, "embedding", "weight");
  check_defined(indices, "embedding", "indices");
  common_device("embedding", {&weight, &indices});
  KILN_CHECK(weight.dim() == 2, "embedding", "'weight' must be 2-D, got {}-D weight of shape {}", weight.dim(),
             weight.shape_str());
  KILN_CHECK_KIND(indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32, Type, "embedding",
                  "Expected tensor for argument #1 'indices' to have one of the following scalar types: int64, "
                  "int32; but got {} instead",
                  dtype_name(indices.dtype()));
  const int64_t num_embeddings = weight.size(0);
  if (padding_idx) {
    KILN_CHECK_KIND(*padding_idx < num_embeddings && *padding_idx >= -num_embeddings, Value, "embedding",
                    "Padding_idx must be within num_embeddings (got padding_idx={} for {} embeddings)", *padding_idx,
                    num_embeddings);
  }
  check_rank(indices, "embedding");
  const ExecutionContext ctx = current_context();
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device(), "embedding");  // before the indices: see index_select
  const std::vector<int64_t> rows = read_rows(ctx, indices.reshape({-1}), num_embeddings, "embedding");
  const Tensor out_rows = out.view({static_cast<int64_t>(rows.size()), weight.size(1)});
  kernels_on(weight, "embedding").index_select(ctx, {out_rows, weight, 0, rows});
  return out;
}

Tensor gather(const Tensor& input, int64_t dim, const Tensor& index) {
  common_device("gather", {&input, &index});
  KILN_AUTOGRAD(gather, input, dim, index);
  check_defined(input, "gather", "input");
  check_defined(index, "gather", "index");
  check_index_dtype(index, "gather");
  check_rank(input, "gather");
  dim = wrap_dim(dim, input.dim(), "gather");
  const Tensor in1 = at_least_1d(input), index1 = at_least_1d(index);
  Tensor out = Tensor::empty(index.sizes(), input.dtype(), input.device(), "gather");
  if (index.numel() == 0) return out;
  KILN_CHECK(in1.dim() == index1.dim(), "gather",
             "Index tensor must have the same number of dimensions as input tensor (index {}, input {})",
             index.shape_str(), input.shape_str());
  for (int64_t d = 0; d < in1.dim(); ++d) {
    KILN_CHECK(d == dim || index1.size(d) <= in1.size(d), "gather",
               "Size does not match at dimension {} expected index {} to be no larger than self {} apart from "
               "dimension {}",
               d, index.shape_str(), input.shape_str(), dim);
  }
  const Tensor out1 = at_least_1d(out);
  kernels_on(input, "gather").gather(current_context(), {out1, in1, dim, index1});
  return out;
}

Tensor scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  common_device("scatter_add_", {&self, &index, &src});
  check_defined(self, "scatter_add_", "self");
  check_writable(self, "scatter_add_");
  check_inplace_source(src, "scatter_add_");
  check_addable_dtype(self.dtype(), "scatter_add_");
  check_defined(index, "scatter_add_", "index");
  check_defined(src, "scatter_add_", "src");
  check_index_dtype(index, "scatter_add_");
  check_rank(self, "scatter_add_");
  KILN_CHECK_KIND(self.dtype() == src.dtype(), Type, "scatter_add_",
                  "Expected self.dtype to be equal to src.dtype (got {} and {})", dtype_name(self.dtype()),
                  dtype_name(src.dtype()));
  dim = wrap_dim(dim, self.dim(), "scatter_add_");
  if (index.numel() == 0) return self;
  const Tensor self1 = at_least_1d(self), index1 = at_least_1d(index), src1 = at_least_1d(src);
  KILN_CHECK(index1.dim() == self1.dim(), "scatter_add_",
             "Index tensor must have the same number of dimensions as self tensor (index {}, self {})",
             index.shape_str(), self.shape_str());
  KILN_CHECK(src1.dim() == self1.dim(), "scatter_add_",
             "Index tensor must have the same number of dimensions as src tensor (index {}, src {})",
             index.shape_str(), src.shape_str());
  bool fits = true;
  for (int64_t d = 0; d < self1.dim(); ++d) {
    fits = fits && index1.size(d) <= src1.size(d) && (d == dim || index1.size(d) <= self1.size(d));
  }
  KILN_CHECK(fits, "scatter_add_",
             "Expected index {} to be smaller than self {} apart from dimension {} and to be smaller size than "
             "src {}",
             index.shape_str(), self.shape_str(), dim, src.shape_str());
  check_no_internal_overlap(self, "scatter_add_");
  check_no_overlap(self, index, "scatter_add_");
  check_no_overlap(self, src, "scatter_add_");
  const Scalar one(int64_t{1});
  kernels_on(self, "scatter_add_").scatter_add(current_context(), {self1, dim, index1, src1, one});
  return self;
}

Tensor scatter_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& src) {
  KILN_AUTOGRAD(scatter_add, input, dim, index, src);
  check_defined(input, "scatter_add", "input");
  return scatter_add_(input.clone(), dim, index, src);
}

Tensor index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  common_device("index_add_", {&self, &index, &source});
  check_defined(self, "index_add_", "self");
  check_writable(self, "index_add_");
  check_inplace_source(source, "index_add_");
  check_addable_dtype(self.dtype(), "index_add_");
  check_defined(index, "index_add_", "index");
  check_defined(source, "index_add_", "source");
  check_index_dtype(index, "index_add_");
  check_rank(self, "index_add_");
  KILN_CHECK_KIND(index.dim() <= 1, Index, "index_add_", "Index is supposed to be a vector, got {}-D index",
                  index.dim());
  KILN_CHECK_KIND(self.dtype() == source.dtype(), Type, "index_add_",
                  "self ({}) and source ({}) must have the same scalar type", dtype_name(self.dtype()),
                  dtype_name(source.dtype()));
  // PyTorch's alpha_check.
  KILN_CHECK_KIND(!alpha.is_bool() || self.dtype() == DType::Bool, Type, "index_add_",
                  "Boolean alpha only supported for Boolean results.");
  KILN_CHECK_KIND(is_floating(self.dtype()) || is_complex(self.dtype()) || alpha.is_integral() || alpha.is_bool(),
                  Type, "index_add_",
                  "For integral input tensors, argument alpha must not be a floating point number (got {}).",
                  alpha.str());
  KILN_CHECK_KIND(is_complex(self.dtype()) || !alpha.is_complex(), Type, "index_add_",
                  "For non-complex input tensors, argument alpha must not be a complex number (got {}).", alpha.str());
  dim = wrap_dim(dim, self.dim(), "index_add_");
  const Tensor self1 = at_least_1d(self), source1 = at_least_1d(source);
  KILN_CHECK_KIND(dim < source1.dim(), Index, "index_add_", "Indexing dim {} is out of bounds of tensor", dim);
  KILN_CHECK(index.numel() == source1.size(dim), "index_add_",
             "Number of indices ({}) should be equal to source.size(dim) ({})", index.numel(), source1.size(dim));
  Shape self_slice = self1.sizes(), source_slice = source1.sizes();
  self_slice.erase(self_slice.begin() + dim);
  source_slice.erase(source_slice.begin() + dim);
  KILN_CHECK(self_slice == source_slice, "index_add_",
             "Source/destination tensor must have same slice shapes. Destination slice shape: {} at dimension {} "
             "and source slice shape: {} at dimension {}.",
             shape_to_string(self_slice), dim, shape_to_string(source_slice), dim);
  const ExecutionContext ctx = current_context();
  read_rows(ctx, index, self1.size(dim), "index_add_");
  check_no_internal_overlap(self, "index_add_");
  check_no_overlap(self, index, "index_add_");
  check_no_overlap(self, source, "index_add_");
  // index_add is a scatter_add whose index is index[j] broadcast over every position
  // outside `dim`: a stride-0 view, no copy.
  const Tensor index1 = at_least_1d(index);
  Shape broadcast_strides(static_cast<size_t>(source1.dim()), 0);
  broadcast_strides[dim] = index1.stride(0);
  const Tensor index_rows = index1.as_strided(source1.sizes(), broadcast_strides);
  kernels_on(self, "index_add_").scatter_add(ctx, {self1, dim, index_rows, source1, alpha});
  return self;
}

Tensor index_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  KILN_AUTOGRAD(index_add, input, dim, index, source, alpha);
  check_defined(input, "index_add", "input");
  return index_add_(input.clone(), dim, index, source, alpha);
}

Tensor masked_fill_(const Tensor& self, const Tensor& mask, const Scalar& value) {
  KILN_INPLACE_AUTOGRAD(
      "masked_fill_", self, nullptr, [&] { masked_fill_(self, mask, value); },
      [&](const Tensor& s) { return masked_fill(s, mask, value); });
  common_device("masked_fill_", {&self, &mask});
  check_defined(self, "masked_fill_", "self");
  check_writable(self, "masked_fill_");
  check_bool_mask(mask, "masked_fill_");
  check_rank(self, "masked_fill_");
  const Shape shape = broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill_");
  KILN_CHECK(shape == self.sizes(), "masked_fill_", "mask of shape {} cannot be broadcast to self of shape {}",
             mask.shape_str(), self.shape_str());
  check_fill_value(value, self.dtype(), "masked_fill_");
  check_no_internal_overlap(self, "masked_fill_");
  check_no_overlap(self, mask, "masked_fill_");
  const Tensor fill = scalar_tensor(value, self.dtype());
  const Tensor mask_full = mask.expand(shape);
  kernels_on(self, "masked_fill_").masked_fill(current_context(), {self, self, mask_full, fill});
  return self;
}

Tensor masked_fill_(const Tensor& self, const Tensor& mask, const Tensor& value) {
  KILN_INPLACE_AUTOGRAD(
      "masked_fill_", self, &value, [&] { masked_fill_(self, mask, value); },
      [&](const Tensor& s) { return masked_fill(s, mask, value); });
  common_device("masked_fill_", {&self, &mask, &value});
  check_inplace_source(value, "masked_fill_");
  return masked_fill_(self, mask, value_from_tensor(value, "masked_fill_"));
}

Tensor masked_fill(const Tensor& input, const Tensor& mask, const Scalar& value) {
  KILN_AUTOGRAD(masked_fill_scalar, input, mask, value);
  check_defined(input, "masked_fill", "input");
  common_device("masked_fill", {&input, &mask});
  check_bool_mask(mask, "masked_fill");
  const Shape shape = broadcast_shapes(input.sizes(), mask.sizes(), "masked_fill");
  KILN_CHECK(static_cast<int64_t>(shape.size()) <= backend::kMaxLoopDims, "masked_fill",
             "tensors with more than {} dims are not supported (got {})", backend::kMaxLoopDims, shape.size());
  check_fill_value(value, input.dtype(), "masked_fill");
  const Tensor fill = scalar_tensor(value, input.dtype());
  Tensor out = Tensor::empty(shape, input.dtype(), input.device(), "masked_fill");
  const Tensor input_full = input.expand(shape);
  const Tensor mask_full = mask.expand(shape);
  kernels_on(input, "masked_fill").masked_fill(current_context(), {out, input_full, mask_full, fill});
  return out;
}

Tensor masked_fill(const Tensor& input, const Tensor& mask, const Tensor& value) {
  KILN_AUTOGRAD(masked_fill, input, mask, value);
  return masked_fill(input, mask, value_from_tensor(value, "masked_fill"));
}

Tensor masked_select(const Tensor& input, const Tensor& mask) {
  common_device("masked_select", {&input, &mask});
  KILN_AUTOGRAD(masked_select, input, mask);
  check_defined(input, "masked_select", "input");
  check_bool_mask(mask, "masked_select");
  const Shape shape = broadcast_shapes(input.sizes(), mask.sizes(), "masked_select");
  KILN_CHECK(static_cast<int64_t>(shape.size()) <= backend::kMaxLoopDims, "masked_select",
             "tensors with more than {} dims are not supported (got {})", backend::kMaxLoopDims, shape.size());
  return kernels_on(input, "masked_select").masked_select(current_context(), input.expand(shape), mask.expand(shape));
}

}  // namespace kiln
