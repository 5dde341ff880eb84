// The *_like creation ops with a memory format (kiln/ops/creation.h): PyTorch's
// empty_like rule (core/memory_format.h), then filled through the copy family, which
// writes any layout.
#include "core/memory_format.h"
#include "kiln/ops/creation.h"

namespace kiln {

Tensor empty_like(const Tensor& t, MemoryFormat memory_format, std::optional<DType> dtype) {
  return empty_like_format(t, memory_format, dtype.value_or(t.dtype()), "empty_like");
}

Tensor zeros_like(const Tensor& t, MemoryFormat memory_format, std::optional<DType> dtype) {
  Tensor out = empty_like_format(t, memory_format, dtype.value_or(t.dtype()), "zeros_like");
  return out.zero_();
}

Tensor ones_like(const Tensor& t, MemoryFormat memory_format, std::optional<DType> dtype) {
  Tensor out = empty_like_format(t, memory_format, dtype.value_or(t.dtype()), "ones_like");
  return out.fill_(Scalar(int64_t{1}));
}

Tensor full_like(const Tensor& t, const Scalar& value, MemoryFormat memory_format, std::optional<DType> dtype) {
  Tensor out = empty_like_format(t, memory_format, dtype.value_or(t.dtype()), "full_like");
  return out.fill_(value);
}

}  // namespace kiln
