// Front ends for advanced indexing (nonzero, index, index_put_): PyTorch's index
// expansion, broadcasting and result-shape rules and its error messages, then one call
// through the index kernel table with the restrided geometry (backend/index.h).
#include "kiln/ops/advanced_index.h"

#include <algorithm>
#include <string>

#include "backend/index.h"
#include "core/addable_dtype.h"
#include "core/memory_overlap.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/index.h"
#include "kiln/type_promotion.h"
#include "ops/fill_value.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

const backend::IndexKernels& kernels_on(const Tensor& t, const char* op) {
  return backend::index_kernels.on(t.device(), op);
}

bool is_mask(const Tensor& t) { return t.dtype() == DType::Bool || t.dtype() == DType::UInt8; }

// self with its index list made plain: every entry an int64 index tensor or empty, masks
// replaced by their nonzero() coordinates (PyTorch's expandTensors). A 0-dim mask
// unsqueezes self where it stands.
struct ExpandedIndex {
  Tensor self;
  std::vector<std::optional<Tensor>> entries;  // one per leading dim of self
};

ExpandedIndex expand_masks(const Tensor& self, const IndexList& indices, const char* op) {
  check_defined(self, op, "self");
  KILN_CHECK_KIND(static_cast<int64_t>(indices.size()) <= self.dim(), Index, op,
                  "too many indices for tensor of dimension {} (got {})", self.dim(), indices.size());
  for (const std::optional<Tensor>& entry : indices) {
    // Kernels read index tensors on the host: one on another device is PyTorch's error.
    if (entry && entry->defined()) common_device(op, {&self, &*entry});
  }
  ExpandedIndex out{self, {}};
  for (const std::optional<Tensor>& entry : indices) {
    const int64_t dim = static_cast<int64_t>(out.entries.size());
    // Masks before this entry may have covered more dims than the list has entries.
    KILN_CHECK_KIND(dim < out.self.dim() || (entry && entry->defined() && is_mask(*entry) && entry->dim() == 0),
                    Index, op, "too many indices for tensor of dimension {} (got {})", self.dim(), dim + 1);
    if (!entry || !entry->defined()) {
      out.entries.emplace_back();
      continue;
    }
    const Tensor& index = *entry;
    if (!is_mask(index)) {
      KILN_CHECK_KIND(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, Index, op,
                      "tensors used as indices must be long, int, byte or bool tensors (got {})",
                      dtype_name(index.dtype()));
      out.entries.emplace_back(index.to(DType::Int64));
      continue;
    }
    if (index.dim() == 0) {
      // A 0-dim mask is a new dim of size 1: kept (index 0) when true, emptied when false.
      out.self = out.self.unsqueeze(dim);
      const bool keep = index.item().to_bool();
      out.entries.emplace_back(zeros({keep ? 1 : 0}, DType::Int64));
      continue;
    }
    KILN_CHECK_KIND(dim + index.dim() <= out.self.dim(), Index, op,
                    "too many indices for tensor of dimension {} (got {})", self.dim(), dim + index.dim());
    for (int64_t j = 0; j < index.dim(); ++j) {
      KILN_CHECK_KIND(index.size(j) == out.self.size(dim + j), Index, op,
                      "The shape of the mask {} at index {} does not match the shape of the indexed tensor {} at "
                      "index {}",
                      index.shape_str(), j, out.self.shape_str(), dim + j);
    }
    const Tensor coords = nonzero(index);
    for (int64_t j = 0; j < index.dim(); ++j) out.entries.emplace_back(coords.select(1, j));
  }
  return out;
}

// Everything the kernels need to walk self through the index tensors, and the result's
// shape. Index tensors are broadcast; when separated by an empty entry, the indexed dims
// of self are moved to the front first (PyTorch's transposeToFront).
struct IndexPlan {
  Shape result_shape;
  Tensor base;                        // self restrided over result_shape
  std::vector<Tensor> indices;        // expanded to result_shape
  std::vector<int64_t> indexed_sizes, indexed_strides, indexed_dims;
  bool any_index = false;
};

IndexPlan plan_index(const ExpandedIndex& ex, const char* op) {
  IndexPlan plan;
  std::vector<Shape> index_shapes;
  std::vector<int64_t> indexed;
  for (size_t d = 0; d < ex.entries.size(); ++d) {
    if (ex.entries[d]) {
      indexed.push_back(static_cast<int64_t>(d));
      index_shapes.push_back(ex.entries[d]->sizes());
    }
  }
  if (indexed.empty()) return plan;
  plan.any_index = true;
  const Tensor& self = ex.self;
  Shape index_shape;
  try {
    index_shape = broadcast_shapes(index_shapes, op);
  } catch (const Error&) {
    std::string shapes;
    for (const Shape& s : index_shapes) shapes += (shapes.empty() ? "" : ", ") + shape_to_string(s);
    fail(ErrorKind::Index, op, "shape mismatch: indexing tensors could not be broadcast together with shapes {}",
         shapes);
  }
  const bool adjacent = indexed.back() - indexed.front() + 1 == static_cast<int64_t>(indexed.size());
  // Dims of self in walk order: before, the indexed block, after.
  const int64_t before = adjacent ? indexed.front() : 0;
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d >= static_cast<int64_t>(ex.entries.size()) || !ex.entries[d]) rest.push_back(d);
  }
  Shape base_strides;
  const auto keep_dim = [&](int64_t d) {
    plan.result_shape.push_back(self.size(d));
    base_strides.push_back(self.stride(d));
  };
  size_t next_rest = 0;
  for (; next_rest < rest.size() && rest[next_rest] < before; ++next_rest) keep_dim(rest[next_rest]);
  const int64_t block_start = static_cast<int64_t>(plan.result_shape.size());
  for (int64_t s : index_shape) {
    plan.result_shape.push_back(s);
    base_strides.push_back(0);
  }
  for (; next_rest < rest.size(); ++next_rest) keep_dim(rest[next_rest]);
  KILN_CHECK(static_cast<int64_t>(plan.result_shape.size()) <= backend::kMaxLoopDims, op,
             "the result would have {} dims; at most {} are supported", plan.result_shape.size(),
             backend::kMaxLoopDims);
  shape_numel(plan.result_shape, op);  // the result's element count fits int64
  plan.base = self.as_strided(plan.result_shape, base_strides, self.storage_offset());
  const int64_t block_end = block_start + static_cast<int64_t>(index_shape.size());
  for (int64_t d : indexed) {
    const Tensor index = ex.entries[d]->expand(index_shape);
    Shape strides(plan.result_shape.size(), 0);
    for (int64_t j = block_start; j < block_end; ++j) strides[j] = index.stride(j - block_start);
    plan.indices.push_back(index.as_strided(plan.result_shape, strides, index.storage_offset()));
    plan.indexed_sizes.push_back(self.size(d));
    plan.indexed_strides.push_back(self.stride(d));
    plan.indexed_dims.push_back(d);
  }
  return plan;
}

// PyTorch's canDispatchToMaskedFill: one mask and nothing else but empty entries, and a
// one-element value: the mask, padded with trailing dims to broadcast against self.
std::optional<Tensor> single_mask_fill(const Tensor& self, const IndexList& indices, const Tensor& values,
                                       const char* op) {
  if (values.numel() != 1) return std::nullopt;
  std::optional<Tensor> mask;
  int64_t dims = 0;
  for (const std::optional<Tensor>& entry : indices) {
    if (!entry || !entry->defined()) {
      ++dims;
      continue;
    }
    if (!is_mask(*entry) || mask || entry->dim() == 0) return std::nullopt;
    mask = *entry;
    for (int64_t j = 0; j < entry->dim(); ++j) {
      KILN_CHECK_KIND(dims + j < self.dim() && entry->size(j) == self.size(dims + j), Index, op,
                      "The shape of the mask {} at index {} does not match the shape of the indexed tensor {} at "
                      "index {}",
                      entry->shape_str(), j, self.shape_str(), dims + j);
    }
    dims += entry->dim();
  }
  if (!mask) return std::nullopt;
  Tensor padded = mask->dtype() == DType::Bool ? *mask : mask->to(DType::Bool);
  for (int64_t d = dims; d < self.dim(); ++d) padded = padded.unsqueeze(-1);
  return padded;
}

// Whether `from` broadcasts to exactly `to` (expand's rule).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] != 1 && from[d] != to[lead + d]) return false;
  }
  return true;
}

}  // namespace

Tensor nonzero(const Tensor& input) {
  check_defined(input, "nonzero", "input");
  KILN_CHECK(input.dim() <= backend::kMaxLoopDims, "nonzero", "tensors with more than {} dims are not supported (got {})",
             backend::kMaxLoopDims, input.dim());
  const auto kernel = require_kernel(kernels_on(input, "nonzero").nonzero, input.device(), "nonzero");
  return kernel(current_context(), input);
}

Tensor index(const Tensor& self, const IndexList& indices) {
  const ExpandedIndex ex = expand_masks(self, indices, "index");
  IndexPlan plan = plan_index(ex, "index");
  if (!plan.any_index) return ex.self;
  Tensor out = empty(plan.result_shape, self.dtype());
  if (out.numel() == 0) return out;
  const auto kernel = require_kernel(kernels_on(self, "index").index_gather, self.device(), "index");
  kernel(current_context(),
         {out, {plan.base, plan.indices, plan.indexed_sizes, plan.indexed_strides, plan.indexed_dims}});
  return out;
}

Tensor index_put_(const Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate) {
  const char* op = "index_put_";
  check_defined(self, op, "self");
  check_defined(values, op, "values");
  check_writable(self, op);
  KILN_CHECK_KIND(static_cast<int64_t>(indices.size()) <= self.dim(), Index, op,
                  "too many indices for tensor of dimension {} (got {})", self.dim(), indices.size());
  if (!accumulate) {
    if (const std::optional<Tensor> mask = single_mask_fill(self, indices, values, op)) {
      return masked_fill_(self, *mask, values.reshape({}));
    }
  }
  ExpandedIndex ex = expand_masks(self, indices, op);
  if (std::none_of(ex.entries.begin(), ex.entries.end(), [](const auto& e) { return e.has_value(); })) {
    // No index tensor: every element of self, as the index arange(size(0)) on dim 0 names.
    if (ex.self.dim() == 0) ex.self = ex.self.unsqueeze(0);
    if (ex.entries.empty()) ex.entries.emplace_back();
    ex.entries[0] = arange(Scalar(ex.self.size(0)), DType::Int64);
  }
  const IndexPlan plan = plan_index(ex, op);
  KILN_CHECK(broadcasts_to(values.sizes(), plan.result_shape), op,
             "shape mismatch: value tensor of shape {} cannot be broadcast to indexing result of shape {}",
             values.shape_str(), shape_to_string(plan.result_shape));
  KILN_CHECK(values.dtype() == self.dtype(), op,
             "Index put requires the source and destination dtypes match, got {} for the destination and {} for the "
             "source.",
             dtype_name(self.dtype()), dtype_name(values.dtype()));
  if (accumulate) check_addable_dtype(self.dtype(), op, "accumulate is not implemented");
  check_no_internal_overlap(self, op);
  for (const std::optional<Tensor>& entry : indices) {
    if (entry && entry->defined()) check_no_overlap(self, *entry, op);
  }
  check_no_overlap(self, values, op);
  const Tensor expanded_values = values.expand(plan.result_shape);
  if (expanded_values.numel() == 0) return self;
  const auto kernel = require_kernel(kernels_on(self, op).index_put, self.device(), op);
  kernel(current_context(),
         {{plan.base, plan.indices, plan.indexed_sizes, plan.indexed_strides, plan.indexed_dims}, expanded_values,
          accumulate});
  return self;
}

Tensor index_put_(const Tensor& self, const IndexList& indices, const Scalar& value) {
  check_defined(self, "index_put_", "self");
  check_fill_value(value, self.dtype(), "index_put_");
  return index_put_(self, indices, scalar_tensor(value, self.dtype()), false);
}

Tensor index_put(const Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate) {
  check_defined(self, "index_put", "self");
  return index_put_(self.clone(), indices, values, accumulate);
}

}  // namespace kiln
