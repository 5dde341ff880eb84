// Tensor geometry: construction, accessors and the view operations (no data copies).
#include "kiln/tensor.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/autograd_meta.h"
#include "core/device_runtime.h"
#include "kiln/allocator.h"
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/tensor_limits.h"

namespace kiln {

Storage::~Storage() {
  if (!from_allocator) return;
  if (device.type == DeviceType::CPU) {
    free_bytes(data, nbytes);
  } else {
    device_runtimes.on(device, "free").free(data, nbytes);
  }
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device, const char* op) {
  KILN_CHECK(device.type == DeviceType::CPU || device_runtimes.has(device.type), op,
             "device {} is not available in this build", device.str());
  KILN_CHECK(device.index == 0, op, "device {} does not exist (kiln uses one device of each type, index 0)",
             device.str());
  auto s = std::make_shared<Storage>();
  s->data = device.type == DeviceType::CPU ? allocate_bytes(nbytes, op)
                                           : device_runtimes.on(device, op).allocate(nbytes, op);
  s->nbytes = nbytes;
  s->device = device;
  s->from_allocator = true;
  return s;
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, std::shared_ptr<void> keep_alive,
                                         Device device) {
  auto s = std::make_shared<Storage>();
  s->data = data;
  s->nbytes = nbytes;
  s->device = device;
  s->keep_alive = std::move(keep_alive);
  return s;
}

Shape contiguous_strides(const Shape& sizes, const char* op) {
  Shape strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    // The outermost dim's extent is no stride: only the ones before it must fit.
    if (i > 0 && !checked_mul(s, std::max<int64_t>(sizes[i], 1), &s)) {
      fail(ErrorKind::Runtime, op, "Stride calculation overflowed with sizes={}", shape_to_string(sizes));
    }
  }
  return strides;
}

bool try_shape_numel(const Shape& sizes, int64_t* numel) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) overflow |= !checked_mul(n, s, &n);
  if (overflow) {
    // A size of 0 makes the product 0, however large the others (as PyTorch counts).
    if (std::find(sizes.begin(), sizes.end(), int64_t{0}) == sizes.end()) return false;
    n = 0;
  }
  *numel = n;
  return true;
}

int64_t shape_numel(const Shape& sizes, const char* op) {
  int64_t n;
  if (!try_shape_numel(sizes, &n)) [[unlikely]] {
    fail(ErrorKind::Runtime, op, "numel: integer multiplication overflow: size {} has more elements than int64 can "
         "count", shape_to_string(sizes));
  }
  return n;
}

std::string shape_to_string(const Shape& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(sizes[i]);
  }
  return out + "]";
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  if (dim < -n || dim >= n) {
    fail(ErrorKind::Index, op, "dimension out of range (expected to be in range of [{}, {}], but got {})",
         -n, n - 1, dim);
  }
  return dim < 0 ? dim + n : dim;
}

void check_tensor_rank(int64_t ndim, const char* op) {
  if (ndim > kMaxTensorDims) [[unlikely]] {
    fail(ErrorKind::Runtime, op, "tensors with more than {} dims are not supported (got {} dims)", kMaxTensorDims,
         ndim);
  }
}

namespace {

void check_sizes(const Shape& sizes, const char* op) {
  check_tensor_rank(static_cast<int64_t>(sizes.size()), op);
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, op, "negative dimension {} in size {}", s, shape_to_string(sizes));
  }
}

// The storage offset of element `index` along a dim of `stride`. as_strided keeps every
// element's offset of a view within int64 bytes (and so of the views derived from it).
// The one exception is the one-past-the-end start of an empty narrow or slice, which may
// step a one-element dim's stride of any size: such a view (`empty`) addresses nothing,
// so where PyTorch's offset would not be addressable in bytes (data_ptr() forms it) it
// keeps the base's offset instead.
int64_t offset_along(const Tensor& t, int64_t index, int64_t stride, bool empty, const char* op) {
  int64_t offset = 0, bytes = 0;
  const bool fits = checked_mul(index, stride, &offset) && checked_add(offset, t.storage_offset(), &offset) &&
                    checked_mul(offset, static_cast<int64_t>(t.element_size()), &bytes);
  if (fits) return offset;
  KILN_CHECK(empty, op, "the view's storage offset overflows int64 bytes (index {}, stride {})", index, stride);
  return t.storage_offset();
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// Strides that let `new_sizes` view memory laid out as (old_sizes, old_strides), or
// nothing when a copy is needed (PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& old_sizes, const Shape& old_strides, const Shape& new_sizes) {
  if (old_sizes.empty()) return Shape(new_sizes.size(), 1);
  if (shape_numel(old_sizes) == 0) return contiguous_strides(new_sizes);
  Shape new_strides(new_sizes.size());
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  // Products of sizes and strides that do not fit cannot describe memory a view can
  // address: such a layout is reported as needing a copy instead of wrapping.
  for (int64_t tensor_d = static_cast<int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    if (!checked_mul(tensor_numel, old_sizes[tensor_d], &tensor_numel)) return std::nullopt;
    int64_t chunk_stride = 0;
    bool chunk_ends = tensor_d == 0 || (old_sizes[tensor_d - 1] != 1 &&
                                        (!checked_mul(tensor_numel, chunk_base_stride, &chunk_stride) ||
                                         old_strides[tensor_d - 1] != chunk_stride));
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
      if (!checked_mul(view_numel, chunk_base_stride, &new_strides[view_d])) return std::nullopt;
      if (!checked_mul(view_numel, new_sizes[view_d], &view_numel)) return std::nullopt;
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Shape infer_size(const Shape& sizes, int64_t numel, const char* op) {
  check_tensor_rank(static_cast<int64_t>(sizes.size()), op);
  Shape out = sizes;
  int64_t known = 1;
  bool overflow = false, has_zero = false;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(infer_at < 0, op, "only one dimension can be inferred, got {}", shape_to_string(sizes));
      infer_at = static_cast<int>(i);
    } else {
      KILN_CHECK(out[i] >= 0, op, "invalid shape dimension {} in {}", out[i], shape_to_string(sizes));
      overflow |= !checked_mul(known, out[i], &known);
      has_zero |= out[i] == 0;
    }
  }
  if (overflow) {
    // Past int64 is more than any input holds, unless a 0 makes the product 0.
    KILN_CHECK(has_zero, op, "shape '{}' is invalid for input of size {}", shape_to_string(sizes), numel);
    known = 0;
  }
  if (infer_at >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0, op, "shape '{}' is invalid for input of size {}",
               shape_to_string(sizes), numel);
    out[infer_at] = numel / known;
  } else {
    KILN_CHECK(known == numel, op, "shape '{}' is invalid for input of size {}", shape_to_string(sizes), numel);
  }
  return out;
}

}  // namespace

const TensorImpl& Tensor::impl() const {
  if (!impl_) fail(ErrorKind::Runtime, "Tensor", "use of an undefined tensor");
  return *impl_;
}

Tensor Tensor::empty(const Shape& sizes, DType dtype, Device device, const char* op) {
  check_sizes(sizes, op);
  // PyTorch's limit and wording: a storage's byte count must fit in ptrdiff_t.
  int64_t numel = 0;
  size_t nbytes = 0;
  if (!try_shape_numel(sizes, &numel) || !checked_mul(static_cast<size_t>(numel), itemsize(dtype), &nbytes) ||
      nbytes > static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max())) {
    fail(ErrorKind::Runtime, op, "Storage size calculation overflowed with sizes={} (elements of {}, {} bytes each)",
         shape_to_string(sizes), dtype_name(dtype), itemsize(dtype));
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->strides = contiguous_strides(sizes, op);
  impl->storage = Storage::allocate(nbytes, device, op);
  impl->sizes = sizes;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& sizes, const Shape& strides,
                            int64_t offset, DType dtype) {
  KILN_CHECK(storage != nullptr, "from_storage", "null storage");
  KILN_CHECK(sizes.size() == strides.size(), "from_storage", "sizes {} and strides {} differ in length",
             shape_to_string(sizes), shape_to_string(strides));
  check_sizes(sizes, "from_storage");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  Tensor t(std::move(impl));
  // Reuse as_strided's bounds check.
  return t.as_strided(sizes, strides, offset);
}


namespace {

// A dim of a tensor that has dims: a 0-dim tensor has no size or stride to ask for
// (PyTorch: "dimension specified as 0 but tensor has no dimensions").
int64_t existing_dim(const Tensor& t, int64_t d, const char* op) {
  KILN_CHECK_KIND(t.dim() > 0, Index, op, "dimension specified as {} but tensor has no dimensions", d);
  return wrap_dim(d, t.dim(), op);
}

}  // namespace

int64_t Tensor::size(int64_t d) const { return impl().sizes[existing_dim(*this, d, "size")]; }
int64_t Tensor::stride(int64_t d) const { return impl().strides[existing_dim(*this, d, "stride")]; }
int64_t Tensor::numel() const { return shape_numel(impl().sizes); }

size_t Tensor::nbytes() const {
  size_t n = 0;
  if (!checked_mul(static_cast<size_t>(numel()), element_size(), &n)) [[unlikely]] {
    fail(ErrorKind::Runtime, "nbytes", "{} elements of {} bytes do not fit in size_t (tensor of size {})", numel(),
         element_size(), shape_str());
  }
  return n;
}

bool Tensor::is_contiguous() const {
  const auto& s = impl().sizes;
  const auto& st = impl().strides;
  // An empty tensor is contiguous whatever its strides (PyTorch's rule): materialising
  // it would only cost strides that may not fit ([0, 2^40, 2^40] has none that do).
  const auto empty = [&] { return std::find(s.begin(), s.end(), int64_t{0}) != s.end(); };
  int64_t expected = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 0) return true;
    if (s[i] != 1 && st[i] != expected) return empty();
    // Every tensor's numel fits, so only an empty one (a 0 further out) overflows here.
    if (!checked_mul(expected, s[i], &expected)) return true;
  }
  return true;
}

void* Tensor::data_ptr() const {
  const auto& im = impl();
  if (im.storage->data == nullptr) return nullptr;
  return static_cast<char*>(im.storage->data) + im.offset * static_cast<int64_t>(itemsize(im.dtype));
}

Tensor Tensor::view(const Shape& sizes) const {
  KILN_TENSOR_METHOD_AUTOGRAD(view, sizes);
  Shape new_sizes = infer_size(sizes, numel(), "view");
  auto strides = view_strides(this->sizes(), this->strides(), new_sizes);
  KILN_CHECK(strides.has_value(), "view",
             "view size {} is not compatible with input tensor's size {} and stride {} (at least one "
             "dimension spans across two contiguous subspaces); use reshape instead",
             shape_to_string(new_sizes), shape_str(), shape_to_string(this->strides()));
  return make_view(*this, new_sizes, *strides, storage_offset());
}

Tensor Tensor::reshape(const Shape& sizes) const {
  Shape new_sizes = infer_size(sizes, numel(), "reshape");
  if (auto strides = view_strides(this->sizes(), this->strides(), new_sizes)) {
    // A tensor in autograd takes the recorded view path, so the gradient flows back.
    if (has_autograd_meta()) return view(new_sizes);
    return make_view(*this, new_sizes, *strides, storage_offset());
  }
  return contiguous().view(new_sizes);
}

Tensor Tensor::permute(const Shape& dims) const {
  KILN_TENSOR_METHOD_AUTOGRAD(permute, dims);
  int64_t n = dim();
  KILN_CHECK(static_cast<int64_t>(dims.size()) == n, "permute",
             "number of dims don't match: tensor has {} dims but got permutation {}", n, shape_to_string(dims));
  Shape sizes(n), strides(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    KILN_CHECK(!seen[d], "permute", "repeated dim {} in permutation {}", d, shape_to_string(dims));
    seen[d] = true;
    sizes[i] = this->sizes()[d];
    strides[i] = this->strides()[d];
  }
  return make_view(*this, sizes, strides, storage_offset());
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  KILN_TENSOR_METHOD_AUTOGRAD(transpose, d0, d1);
  int64_t n = dim();
  if (n == 0) {
    wrap_dim(d0, 0, "transpose");
    wrap_dim(d1, 0, "transpose");
    return make_view(*this, sizes(), strides(), storage_offset());
  }
  d0 = wrap_dim(d0, n, "transpose");
  d1 = wrap_dim(d1, n, "transpose");
  Shape sizes = this->sizes(), strides = this->strides();
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return make_view(*this, sizes, strides, storage_offset());
}

Tensor Tensor::t() const {
  KILN_CHECK(dim() <= 2, "t", "expects a tensor with <= 2 dimensions, but self is {}D", dim());
  return dim() < 2 ? transpose(0, 0) : transpose(0, 1);
}

Tensor Tensor::expand(const Shape& sizes) const {
  KILN_TENSOR_METHOD_AUTOGRAD(expand, sizes);
  int64_t n = static_cast<int64_t>(sizes.size());
  int64_t nd = dim();
  check_tensor_rank(n, "expand");
  KILN_CHECK(n >= nd, "expand",
             "the number of sizes provided ({}) must be greater or equal to the number of dimensions in "
             "the tensor ({})", n, nd);
  Shape out_sizes(n), out_strides(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t src = i - (n - nd);
    int64_t want = sizes[i];
    if (src < 0) {
      KILN_CHECK(want >= 0, "expand", "the expanded size {} is not allowed in a leading, non-existing "
                 "dimension {}", want, i);
      out_sizes[i] = want;
      out_strides[i] = 0;
      continue;
    }
    int64_t have = this->sizes()[src];
    if (want == -1) want = have;
    if (have == want) {
      out_sizes[i] = have;
      out_strides[i] = this->strides()[src];
    } else {
      KILN_CHECK(have == 1 && want >= 0, "expand",
                 "the expanded size of the tensor ({}) must match the existing size ({}) at non-singleton "
                 "dimension {}; target sizes {}, tensor sizes {}",
                 want, have, i, shape_to_string(sizes), shape_str());
      out_sizes[i] = want;
      out_strides[i] = 0;
    }
  }
  // New and widened dims have stride 0, so only the element count can outgrow int64.
  shape_numel(out_sizes, "expand");
  return make_view(*this, out_sizes, out_strides, storage_offset());
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  KILN_TENSOR_METHOD_AUTOGRAD(narrow, d, start, length);
  KILN_CHECK(dim() > 0, "narrow", "cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "narrow");
  int64_t size = sizes()[d];
  if (start < 0) start += size;
  KILN_CHECK_KIND(start >= 0 && start <= size, Index, "narrow",
                  "start ({}) out of range for dimension {} of size {}", start, d, size);
  // length <= size - start, not start + length <= size: the sum may wrap.
  KILN_CHECK(length >= 0 && length <= size - start, "narrow",
             "start ({}) + length ({}) exceeds dimension size ({})", start, length, size);
  Shape s = sizes();
  s[d] = length;
  return make_view(*this, s, strides(), offset_along(*this, start, strides()[d], length == 0, "narrow"));
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start_opt, std::optional<int64_t> end_opt,
                     int64_t step) const {
  KILN_TENSOR_METHOD_AUTOGRAD(slice, d, start_opt, end_opt, step);
  KILN_CHECK(dim() > 0, "slice", "cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "slice");
  KILN_CHECK_KIND(step > 0, Value, "slice", "step must be greater than zero, got {}", step);
  int64_t size = sizes()[d];
  int64_t start = start_opt.value_or(0);
  int64_t end = end_opt.value_or(size);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape s = sizes(), st = strides();
  s[d] = ceil_div(end - start, step);  // step may be near INT64_MAX
  // The stride of a dim of extent 0 or 1 never moves a pointer: keeping it avoids a
  // product with a huge step. Longer dims stay inside the original's span.
  if (s[d] > 1) st[d] = checked_mul(st[d], step, "slice");
  return make_view(*this, s, st, offset_along(*this, start, strides()[d], s[d] == 0, "slice"));
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  KILN_TENSOR_METHOD_AUTOGRAD(select, d, index);
  KILN_CHECK_KIND(dim() > 0, Index, "select", "select() cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "select");
  int64_t size = sizes()[d];
  KILN_CHECK_KIND(index >= -size && index < size, Index, "select",
                  "index {} is out of bounds for dimension {} with size {}", index, d, size);
  if (index < 0) index += size;
  Shape s = sizes(), st = strides();
  int64_t offset = offset_along(*this, index, st[d], numel() == 0, "select");
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return make_view(*this, s, st, offset);
}

Tensor Tensor::squeeze() const {
  KILN_TENSOR_METHOD_AUTOGRAD(squeeze_all);
  Shape s, st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (sizes()[i] != 1) {
      s.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  }
  return make_view(*this, s, st, storage_offset());
}

Tensor Tensor::squeeze(int64_t d) const {
  KILN_TENSOR_METHOD_AUTOGRAD(squeeze, d);
  if (dim() == 0) {
    wrap_dim(d, 0, "squeeze");
    return make_view(*this, sizes(), strides(), storage_offset());
  }
  d = wrap_dim(d, dim(), "squeeze");
  if (sizes()[d] != 1) return make_view(*this, sizes(), strides(), storage_offset());
  Shape s = sizes(), st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return make_view(*this, s, st, storage_offset());
}

Tensor Tensor::unsqueeze(int64_t d) const {
  KILN_TENSOR_METHOD_AUTOGRAD(unsqueeze, d);
  check_tensor_rank(dim() + 1, "unsqueeze");
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = sizes(), st = strides();
  int64_t new_stride = d < dim() ? checked_mul(st[d], s[d], "unsqueeze") : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  return make_view(*this, s, st, storage_offset());
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  KILN_CHECK(start_dim <= end_dim, "flatten", "start_dim ({}) cannot come after end_dim ({})", start_dim, end_dim);
  Shape s(sizes().begin(), sizes().begin() + start_dim);
  // Merged dims of an empty tensor (a 0 outside them) can multiply past int64.
  s.push_back(shape_numel(Shape(sizes().begin() + start_dim, sizes().begin() + end_dim + 1), "flatten"));
  s.insert(s.end(), sizes().begin() + end_dim + 1, sizes().end());
  return reshape(s);
}

Tensor Tensor::unflatten(int64_t d, const Shape& new_sizes) const {
  d = existing_dim(*this, d, "unflatten");
  KILN_CHECK(!new_sizes.empty(), "unflatten", "sizes must be non-empty");
  Shape inner = infer_size(new_sizes, sizes()[d], "unflatten");
  Shape s(sizes().begin(), sizes().begin() + d);
  s.insert(s.end(), inner.begin(), inner.end());
  s.insert(s.end(), sizes().begin() + d + 1, sizes().end());
  return view(s);
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> offset_opt) const {
  KILN_TENSOR_METHOD_AUTOGRAD(as_strided, sizes, strides, offset_opt);
  KILN_CHECK(sizes.size() == strides.size(), "as_strided", "mismatch in length of strides ({}) and sizes ({})",
             strides.size(), sizes.size());
  check_sizes(sizes, "as_strided");
  int64_t offset = offset_opt.value_or(storage_offset());
  KILN_CHECK(offset >= 0, "as_strided", "negative storage offset {}", offset);
  const bool empty_view = shape_numel(sizes, "as_strided") == 0;
  // The element range [lo, hi] the sizes and strides span from the offset, in checked
  // arithmetic: wrapped, a huge size or stride would pass the bounds check below. An
  // empty view reads nothing, but views derived from it (narrow, select, slice) compute
  // offsets inside this range, so it must fit in int64 bytes too.
  int64_t lo = offset, hi = offset;
  bool fits = true;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) continue;
    int64_t span = 0;
    int64_t& end = strides[i] < 0 ? lo : hi;
    fits = fits && checked_mul(sizes[i] - 1, strides[i], &span) && checked_add(end, span, &end);
  }
  const auto isz = static_cast<int64_t>(itemsize(dtype()));
  int64_t lo_bytes = 0, hi_bytes = 0;
  fits = fits && checked_mul(lo, isz, &lo_bytes) && checked_mul(hi, isz, &hi_bytes);
  KILN_CHECK(fits, "as_strided",
             "setStorage: sizes {}, strides {} and storage offset {} reach elements past what int64 can address",
             shape_to_string(sizes), shape_to_string(strides), offset);
  int64_t capacity = static_cast<int64_t>(storage()->nbytes / itemsize(dtype()));
  KILN_CHECK(empty_view || (lo >= 0 && hi < capacity), "as_strided",
             "setStorage: sizes {}, strides {}, storage offset {} require elements [{}, {}] but the storage "
             "holds {} elements of {}", shape_to_string(sizes), shape_to_string(strides), offset, lo, hi,
             capacity, dtype_name(dtype()));
  return make_view(*this, sizes, strides, offset);
}

Tensor Tensor::movedim(int64_t source, int64_t destination) const {
  int64_t n = dim();
  source = wrap_dim(source, n, "movedim");
  destination = wrap_dim(destination, n, "movedim");
  Shape order;
  for (int64_t i = 0; i < n; ++i) if (i != source) order.push_back(i);
  order.insert(order.begin() + destination, source);
  return permute(order);
}

std::string Tensor::shape_str() const { return shape_to_string(sizes()); }

std::string Tensor::describe() const {
  if (!defined()) return "Tensor(undefined)";
  return "Tensor(shape=" + shape_str() + ", dtype=" + std::string(dtype_name(dtype())) + ")";
}

}  // namespace kiln
