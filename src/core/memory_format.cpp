// Memory formats (torch.memory_format) and PyTorch's stride propagation: the format
// predicates, allocation in a format, contiguous/clone/to with a format, and the output
// strides of elementwise ops (core/memory_format.h).
#include "core/memory_format.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <vector>

#include "core/autograd_meta.h"
#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln {

std::string_view memory_format_name(MemoryFormat memory_format) {
  switch (memory_format) {
    case MemoryFormat::Contiguous: return "contiguous_format";
    case MemoryFormat::ChannelsLast: return "channels_last";
    case MemoryFormat::ChannelsLast3d: return "channels_last_3d";
    case MemoryFormat::Preserve: return "preserve_format";
  }
  return "unknown_format";
}

namespace {

// The dims of a channels-last layout from the innermost out: C, then the spatial dims
// from the last, then N (PyTorch's {1, 3, 2, 0} and {1, 4, 3, 2, 0}).
constexpr std::array<int, 4> kChannelsLastOrder{1, 3, 2, 0};
constexpr std::array<int, 5> kChannelsLast3dOrder{1, 4, 3, 2, 0};

int required_rank(MemoryFormat f) { return f == MemoryFormat::ChannelsLast ? 4 : 5; }

void check_rank(MemoryFormat f, size_t rank, const char* op) {
  KILN_CHECK(static_cast<int>(rank) == required_rank(f), op, "required rank {} tensor to use {} format",
             required_rank(f), memory_format_name(f));
}

// PyTorch's compute_channels_last_contiguous_2d/3d: the strides are exactly those of a
// dense channels-last tensor, size-1 dims ignored.
template <size_t N>
bool channels_last_contiguous(const Shape& sizes, const Shape& strides, const std::array<int, N>& order) {
  if (sizes.size() != N) return false;
  int64_t expected = 1;
  for (int d : order) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    // Products of sizes of a tensor that exists fit, except past a 0 (where any stride is fine).
    if (!checked_mul(expected, sizes[d], &expected)) return true;
  }
  return true;
}

// PyTorch's is_channels_last_strides_2d_s4/3d_s5: the strides order the dims like
// channels-last, with the ambiguous cases (a trivial C stride, N111, N1H1) resolved to
// row-major so that the format is only suggested when the layout says so.
template <size_t N>
bool strides_like_channels_last(const Shape& sizes, const Shape& strides, const std::array<int, N>& order) {
  if (sizes.size() != N || strides[1] == 0) return false;
  int64_t min = 0;
  for (int d : order) {
    if (sizes[d] == 0 || strides[d] < min) return false;
    if (d == 0 && min == strides[1]) return false;
    min = strides[d];
    if (sizes[d] > 1 && !checked_mul(min, sizes[d], &min)) min = std::numeric_limits<int64_t>::max();
  }
  return true;
}

// PyTorch's insertion sort of dims by stride (TensorIterator::reorder_dimensions and
// infer_dense_strides, which share it): perm[0] is the fastest-moving dim. A stride-0
// (broadcast) dim is no evidence; equal strides put the smaller dim first; the first
// operand with an opinion decides.
std::vector<int> order_dims_by_strides(const Shape& shape, const std::vector<Shape>& operand_strides) {
  const int ndim = static_cast<int>(shape.size());
  std::vector<int> perm(ndim);
  for (int i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  const auto should_swap = [&](int d0, int d1) {
    for (const Shape& st : operand_strides) {
      const int64_t s0 = st[d0], s1 = st[d1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  for (int i = 1; i < ndim; ++i) {
    int dim1 = i;
    for (int dim0 = i - 1; dim0 >= 0; --dim0) {
      const int cmp = should_swap(perm[dim0], perm[dim1]);
      if (cmp > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (cmp < 0) {
        break;
      }
    }
  }
  return perm;
}

bool is_row_major_order(const std::vector<int>& perm) {
  const int ndim = static_cast<int>(perm.size());
  for (int j = 0; j < ndim; ++j) {
    if (perm[j] != ndim - 1 - j) return false;
  }
  return true;
}

// `t`'s strides as an operand of shape `shape` (PyTorch's compute_strides): leading and
// broadcast dims read stride 0.
Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  const size_t offset = shape.size() - static_cast<size_t>(t.dim());
  for (size_t i = 0; i < static_cast<size_t>(t.dim()); ++i) {
    const bool broadcast = t.sizes()[i] == 1 && shape[offset + i] != 1;
    st[offset + i] = broadcast ? 0 : t.strides()[i];
  }
  return st;
}

Shape outer_to_inner(const Shape& strides) {
  Shape perm(strides.size());
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  return perm;
}

Shape inverse_permutation(const Shape& perm) {
  Shape inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

// While gradients are recorded, a copy into a layout is built from recorded pieces: a
// permuted view of `self` whose row-major copy (`copy`: clone or to) has the target's
// dim order, permuted back. Only the strides of size-1 dims can differ from the
// unrecorded path's.
template <typename CopyFn>
Tensor recorded_copy_in_layout(const Tensor& self, const Shape& target_strides, CopyFn&& copy) {
  const Shape perm = outer_to_inner(target_strides);
  return copy(self.permute(perm)).permute(inverse_permutation(perm));
}

}  // namespace

Shape dims_by_memory_order(const Tensor& t) { return outer_to_inner(t.strides()); }

Shape strides_for_memory_format(const Shape& sizes, MemoryFormat memory_format, const char* op) {
  switch (memory_format) {
    case MemoryFormat::Contiguous: return contiguous_strides(sizes, op);
    case MemoryFormat::ChannelsLast:
    case MemoryFormat::ChannelsLast3d: {
      check_rank(memory_format, sizes.size(), op);
      Shape strides(sizes.size());
      int64_t next = 1;
      const auto place = [&](int d) {
        strides[d] = next;
        // PyTorch's get_channels_last_strides_*: no max(size, 1), so a 0 size zeroes
        // the strides outside it.
        KILN_CHECK(checked_mul(next, sizes[d], &next) || d == 0, op, "Stride calculation overflowed with sizes={}",
                   shape_to_string(sizes));
      };
      if (memory_format == MemoryFormat::ChannelsLast) {
        for (int d : kChannelsLastOrder) place(d);
      } else {
        for (int d : kChannelsLast3dOrder) place(d);
      }
      return strides;
    }
    case MemoryFormat::Preserve: break;
  }
  fail(ErrorKind::Runtime, op, "unsupported memory format option preserve_format (there is no input to preserve)");
}

Shape dense_strides_like(const Shape& sizes, const Shape& strides) {
  const size_t ndim = sizes.size();
  if (ndim == 0) return {};
  if (ndim == 1) return {1};
  const std::vector<int> perm = order_dims_by_strides(sizes, {strides});
  Shape out(ndim);
  int64_t next = 1;
  for (int d : perm) {
    out[d] = next;
    // Size 0 counts as 1, as in PyTorch: the tensor has no elements either way.
    if (sizes[d] > 1) next = checked_mul(next, sizes[d], "empty_like");
  }
  return out;
}

// A dense tensor's strides for new memory laid out like it. A dim of fewer than two
// elements is never stepped, so a view may carry any stride there, a negative one too,
// which new memory cannot have: such a stride becomes 0.
static Shape lendable_strides(const Tensor& t) {
  Shape strides = t.strides();
  for (size_t d = 0; d < strides.size(); ++d) {
    if (t.sizes()[d] < 2 && strides[d] < 0) strides[d] = 0;
  }
  return strides;
}

std::optional<Shape> elementwise_output_strides(const Shape& shape, std::initializer_list<const Tensor*> inputs) {
  // The hot path: row-major inputs (broadcast or not) give a row-major output. (PyTorch
  // could order dims differently only when a size-1 dim of a broadcast input carries an
  // odd stride; kiln stays row-major there.)
  bool all_contiguous = true;
  for (const Tensor* t : inputs) all_contiguous = all_contiguous && t->is_contiguous();
  if (all_contiguous || shape.size() < 2) return std::nullopt;

  // TensorIterator's fast set-up: operands of one shape, all channels-last or all dense
  // with the very same strides, lend the output their layout.
  bool same_shape = true, channels_last = true, same_dense = true;
  const Tensor* first = *inputs.begin();
  for (const Tensor* t : inputs) {
    same_shape = same_shape && t->sizes() == shape;
    if (!same_shape) break;
    channels_last = channels_last && t->is_contiguous(MemoryFormat::ChannelsLast);
    same_dense = same_dense && t->is_non_overlapping_and_dense() && t->strides() == first->strides();
  }
  if (same_shape && channels_last) return strides_for_memory_format(shape, MemoryFormat::ChannelsLast, "elementwise");
  if (same_shape && same_dense) return lendable_strides(*first);

  std::vector<Shape> operand_strides;
  operand_strides.reserve(inputs.size());
  for (const Tensor* t : inputs) operand_strides.push_back(broadcast_strides(*t, shape));
  const std::vector<int> perm = order_dims_by_strides(shape, operand_strides);
  if (is_row_major_order(perm)) return std::nullopt;
  // TensorIterator's compatible_stride: plain products of the permuted sizes.
  Shape out(shape.size());
  int64_t next = 1;
  for (int d : perm) {
    out[d] = next;
    if (!checked_mul(next, shape[d], &next)) return std::nullopt;  // only past a 0 size: any layout is empty
  }
  return out;
}

Tensor empty_elementwise_output(const Shape& shape, DType dtype, Device device,
                                std::initializer_list<const Tensor*> inputs, const char* op) {
  const std::optional<Shape> strides = elementwise_output_strides(shape, inputs);
  if (!strides) return Tensor::empty(shape, dtype, device, op);
  return Tensor::empty_strided(shape, *strides, dtype, device, op);
}

Tensor empty_like_format(const Tensor& t, MemoryFormat memory_format, DType dtype, const char* op) {
  if (memory_format != MemoryFormat::Preserve) return Tensor::empty(t.sizes(), dtype, t.device(), memory_format, op);
  // Exact strides for any dense input, a row-major one included (its size-1 dims may
  // carry other strides, which PyTorch keeps).
  const Shape strides = t.is_non_overlapping_and_dense() ? lendable_strides(t) : dense_strides_like(t.sizes(), t.strides());
  return Tensor::empty_strided(t.sizes(), strides, dtype, t.device(), op);
}

// ---- Tensor methods ----

Tensor Tensor::empty(const Shape& sizes, DType dtype, Device device, MemoryFormat memory_format, const char* op) {
  if (memory_format == MemoryFormat::Contiguous) return empty(sizes, dtype, device, op);
  for (int64_t s : sizes) KILN_CHECK(s >= 0, op, "negative dimension {} in size {}", s, shape_to_string(sizes));
  return empty_strided(sizes, strides_for_memory_format(sizes, memory_format, op), dtype, device, op);
}

Tensor Tensor::empty_strided(const Shape& sizes, const Shape& strides, DType dtype, Device device, const char* op) {
  KILN_CHECK(sizes.size() == strides.size(), op, "mismatch in length of strides ({}) and sizes ({})", strides.size(),
             sizes.size());
  int64_t numel = 0;
  for (int64_t s : sizes) KILN_CHECK(s >= 0, op, "negative dimension {} in size {}", s, shape_to_string(sizes));
  for (int64_t s : strides) KILN_CHECK(s >= 0, op, "negative strides are not supported, got strides {}",
                                       shape_to_string(strides));
  KILN_CHECK(try_shape_numel(sizes, &numel), op, "Storage size calculation overflowed with sizes={}",
             shape_to_string(sizes));
  // The storage reaches the furthest element: 1 + sum((size - 1) * stride).
  int64_t extent = numel == 0 ? 0 : 1;
  bool fits = true;
  for (size_t i = 0; i < sizes.size() && numel > 0; ++i) {
    int64_t span = 0;
    fits = fits && checked_mul(sizes[i] - 1, strides[i], &span) && checked_add(extent, span, &extent);
  }
  size_t nbytes = 0;
  fits = fits && checked_mul(static_cast<size_t>(extent), itemsize(dtype), &nbytes) &&
         nbytes <= static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max());
  KILN_CHECK(fits, op, "Storage size calculation overflowed with sizes={} and strides={}", shape_to_string(sizes),
             shape_to_string(strides));
  return from_storage(Storage::allocate(nbytes, device, op), sizes, strides, 0, dtype);
}

bool Tensor::is_contiguous(MemoryFormat memory_format) const {
  switch (memory_format) {
    case MemoryFormat::ChannelsLast: return channels_last_contiguous(sizes(), strides(), kChannelsLastOrder);
    case MemoryFormat::ChannelsLast3d: return channels_last_contiguous(sizes(), strides(), kChannelsLast3dOrder);
    case MemoryFormat::Contiguous:
    case MemoryFormat::Preserve: break;
  }
  return is_contiguous();
}

bool Tensor::is_non_overlapping_and_dense() const {
  const Shape& s = sizes();
  const Shape& st = strides();
  if (dim() == 1) return s[0] < 2 || st[0] == 1;
  // PyTorch's compute_non_overlapping_and_dense: dims by stride, size-0/1 dims last.
  Shape perm(s.size());
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    if (s[a] < 2) return false;
    if (s[b] < 2) return true;
    return st[a] < st[b];
  });
  int64_t required = 1;
  for (int64_t d : perm) {
    if (s[d] < 2) return true;
    if (st[d] != required) return false;
    required *= s[d];  // a partial product of numel, which fits
  }
  return true;
}

MemoryFormat Tensor::suggest_memory_format() const {
  if (strides_like_channels_last(sizes(), strides(), kChannelsLastOrder)) return MemoryFormat::ChannelsLast;
  if (strides_like_channels_last(sizes(), strides(), kChannelsLast3dOrder)) return MemoryFormat::ChannelsLast3d;
  return MemoryFormat::Contiguous;
}

Tensor Tensor::contiguous(MemoryFormat memory_format) const {
  if (is_contiguous(memory_format)) return *this;
  KILN_CHECK(memory_format != MemoryFormat::Preserve, "contiguous",
             "preserve memory format is unsupported by the contiguous operator");
  return clone(memory_format);
}

Tensor Tensor::clone(MemoryFormat memory_format) const {
  if (memory_format == MemoryFormat::Contiguous) return clone();
  Tensor out = empty_like_format(*this, memory_format, dtype(), "clone");
  if (has_autograd_meta() && autograd_hooks::records(*this)) [[unlikely]] {
    return recorded_copy_in_layout(*this, out.strides(), [](const Tensor& v) { return v.clone(); });
  }
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType target, MemoryFormat memory_format) const {
  if (target == dtype() && (memory_format == MemoryFormat::Preserve || suggest_memory_format() == memory_format)) {
    return *this;
  }
  if (memory_format == MemoryFormat::Contiguous) return target == dtype() ? clone() : to(target);
  Tensor out = empty_like_format(*this, memory_format, target, "to");
  if (has_autograd_meta() && autograd_hooks::records(*this)) [[unlikely]] {
    return recorded_copy_in_layout(*this, out.strides(), [&](const Tensor& v) {
      return target == dtype() ? v.clone() : v.to(target);
    });
  }
  out.copy_(*this);
  return out;
}

}  // namespace kiln
