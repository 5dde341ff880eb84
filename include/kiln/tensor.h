// kiln::Tensor: sizes, strides and an offset over shared storage, like torch.Tensor.
// A Tensor is a handle: copies share the same data (use clone() for a deep copy).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/device.h"
#include "kiln/dtype.h"
#include "kiln/scalar.h"

namespace kiln {

using Shape = std::vector<int64_t>;

// torch.memory_format: the order a dense tensor keeps its elements in (docs/ops.md,
// "Memory formats"). ChannelsLast is NHWC order for a 4-D [N, C, H, W] tensor,
// ChannelsLast3d NDHWC for a 5-D one; Preserve (for clone, to and the *_like ops) keeps
// the input's own order. Implemented in src/core/memory_format.cpp.
enum class MemoryFormat : uint8_t { Contiguous, ChannelsLast, ChannelsLast3d, Preserve };
// "contiguous_format", "channels_last", "channels_last_3d", "preserve_format".
std::string_view memory_format_name(MemoryFormat memory_format);

// A block of memory shared by every view of it. Either owned (from the caching
// allocator) or borrowed from elsewhere (an mmap'd file), with `keep_alive` holding
// whatever must outlive the data.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device = kCPU;
  bool from_allocator = false;
  // Borrowed memory that must not be written: a read-only numpy array, a file mapped
  // without write access. In-place ops refuse it (check_writable) instead of writing
  // through, which would change the caller's data or fault on the mapping.
  bool read_only = false;
  std::shared_ptr<void> keep_alive;
  // Bumped by every in-place write (check_writable); autograd compares it with the value
  // a saved tensor had, so a change to a tensor the backward needs is an error.
  std::atomic<uint64_t> version{0};

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  // Memory for nbytes; a request that cannot be met raises a kiln::Error naming `op` and
  // the byte count (never std::bad_alloc).
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device = kCPU, const char* op = "empty");
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, std::shared_ptr<void> keep_alive,
                                         Device device = kCPU);
};

// Autograd state (requires_grad, grad, grad_fn; docs/autograd.md). Null for every tensor
// that takes no part in autograd, so ops pay one pointer test for it.
struct AutogradMeta;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;  // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  std::shared_ptr<AutogradMeta> autograd;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // A new, uninitialised, contiguous tensor. Sizes whose element or byte count does not
  // fit, or memory the system refuses, raise a kiln::Error naming `op`.
  static Tensor empty(const Shape& sizes, DType dtype = DType::Float32, Device device = kCPU,
                      const char* op = "empty");
  // The same in a memory format (Preserve is refused: there is no input to preserve).
  // A format that needs another rank raises PyTorch's "required rank 4 tensor to use
  // channels_last format".
  static Tensor empty(const Shape& sizes, DType dtype, Device device, MemoryFormat memory_format,
                      const char* op = "empty");
  // torch.empty_strided: new memory addressed with `strides` (non-negative), sized to
  // the furthest element they reach.
  static Tensor empty_strided(const Shape& sizes, const Shape& strides, DType dtype = DType::Float32,
                              Device device = kCPU, const char* op = "empty_strided");
  // A 0-dim CPU tensor holding `value` in its widest natural dtype (bool, int64, uint64,
  // float64 or complex128): the exact source that scalar_tensor and fill_ convert from.
  static Tensor from_scalar(const Scalar& value);
  // A tensor viewing `storage` with the given geometry; checked against the storage size.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& sizes, const Shape& strides,
                             int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  Shape shape() const { return impl().sizes; }
  int64_t size(int64_t d) const;    // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t storage_offset() const { return impl().offset; }
  int64_t numel() const;
  size_t element_size() const { return itemsize(dtype()); }
  // numel() * element_size(); a kiln::Error when that does not fit in size_t (possible
  // only for an expanded view, whose elements share memory).
  size_t nbytes() const;
  bool is_contiguous() const;
  // PyTorch's is_contiguous(memory_format): ChannelsLast only for 4-D tensors,
  // ChannelsLast3d only for 5-D ones (false otherwise); Preserve asks is_contiguous().
  bool is_contiguous(MemoryFormat memory_format) const;
  // Every element at its own address and no gaps: the strides are a permutation of a
  // contiguous tensor's (size-1 dims excepted).
  bool is_non_overlapping_and_dense() const;
  // ChannelsLast / ChannelsLast3d when the strides order the dims like that format
  // (PyTorch's suggest_memory_format, ambiguous cases resolved to Contiguous).
  MemoryFormat suggest_memory_format() const;
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }

  // Address of element [0, 0, ...].
  void* data_ptr() const;
  template <typename T>
  T* data() const { return static_cast<T*>(data_ptr()); }

  // ---- views (share storage; no copies) ----
  Tensor view(const Shape& sizes) const;          // one dim may be -1
  Tensor reshape(const Shape& sizes) const;       // a view when possible, else a copy
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;                               // 0-, 1- or 2-D only
  Tensor expand(const Shape& sizes) const;        // -1 keeps a size; new leading dims allowed
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  // Python slicing a[start:end:step] along dim; start/end clamp like Python; step >= 1.
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> offset = std::nullopt) const;
  Tensor movedim(int64_t source, int64_t destination) const;

  // ---- copies ----
  Tensor contiguous() const;  // self when already contiguous
  // Self when already contiguous in that format, else a copy in it (Preserve refused).
  Tensor contiguous(MemoryFormat memory_format) const;
  // A row-major copy. (PyTorch's default is Preserve; kiln's internal callers rely on
  // getting row-major memory, so C++ asks for a format explicitly.)
  Tensor clone() const;
  Tensor clone(MemoryFormat memory_format) const;
  Tensor to(DType dtype) const;  // self when the dtype already matches, else row-major
  // PyTorch's to(dtype, memory_format=...): self when the dtype matches and the format
  // is Preserve or the one suggest_memory_format names; else a copy (Preserve keeps the
  // strides of a dense input and the dim order of any other).
  Tensor to(DType dtype, MemoryFormat memory_format) const;
  // A contiguous copy on `device` (self when already there); same dtype and shape.
  Tensor to(Device device) const;
  // Copies src (broadcast to self's shape, cast to self's dtype) into self.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_() { return fill_(Scalar(int64_t{0})); }

  // The value of a one-element tensor.
  Scalar item() const;
  // Element at a multi-index, as a Scalar (for tests and printing; slow).
  Scalar at(const Shape& index) const;

  // ---- autograd (docs/autograd.md; the engine is in kiln/autograd.h) ----
  // True when gradients flow to this tensor: a leaf marked with requires_grad_, or
  // the result of a recorded op.
  bool requires_grad() const;
  // Marks a leaf (a tensor no recorded op produced); floating or complex dtypes only.
  Tensor& requires_grad_(bool requires_grad = true);
  bool is_leaf() const;
  // The gradient accumulated by backward into a leaf (undefined when none).
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  // A tensor sharing this one's data and version counter, outside any graph.
  Tensor detach() const;
  Tensor& detach_();
  // The storage's in-place write count (PyTorch's Tensor._version).
  int64_t version() const { return static_cast<int64_t>(storage()->version.load(std::memory_order_relaxed)); }
  // The one test ops make before asking autograd anything (no meta, no recording).
  bool has_autograd_meta() const noexcept { return impl_ != nullptr && impl_->autograd != nullptr; }
  AutogradMeta* autograd_meta() const noexcept { return impl_ != nullptr ? impl_->autograd.get() : nullptr; }
  const std::shared_ptr<TensorImpl>& unsafe_impl() const noexcept { return impl_; }

  // "[2, 3]" — used in error messages.
  std::string shape_str() const;
  // "Tensor(shape=[2, 3], dtype=float32)"
  std::string describe() const;
  // Values, numpy-like, for printing in tests and Python's repr.
  std::string str() const;

 private:
  const TensorImpl& impl() const;
  std::shared_ptr<TensorImpl> impl_;
};

// Row-major strides for `sizes`; a kiln::Error naming `op` when one does not fit in
// int64 (possible only for sizes holding a 0, whose product is 0).
Shape contiguous_strides(const Shape& sizes, const char* op = "contiguous_strides");
// The number of elements of `sizes` (0 when any size is 0, whatever the others). Raises
// a kiln::Error naming `op` when it does not fit in int64. Every tensor's numel fits (the
// constructors and views that can grow it check), so Tensor::numel() never raises.
int64_t shape_numel(const Shape& sizes, const char* op = "numel");
// As shape_numel, but returns false instead of raising.
bool try_shape_numel(const Shape& sizes, int64_t* numel);
std::string shape_to_string(const Shape& sizes);
// Wraps a possibly negative dim into [0, ndim); ndim 0 accepts -1 and 0 like PyTorch.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// What every op that writes into an existing tensor (copy_, fill_, the in-place
// arithmetic and index ops) checks first: a Runtime error naming `op` when self's
// storage is read-only, or when self requires grad while grad mode is on (PyTorch's
// leaf error; kiln's autograd does not record in-place ops yet). It also bumps the
// storage's version counter.
void check_writable(const Tensor& self, const char* op);
// What in-place ops check of the tensor they read from: while grad mode is on, a source
// that requires grad is an error (the in-place write would not be recorded).
void check_inplace_source(const Tensor& source, const char* op);

}  // namespace kiln
