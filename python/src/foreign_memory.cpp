#include "foreign_memory.h"

#include "kiln/error.h"
#include "kiln/int_math.h"

namespace kiln::python {

Tensor borrow_foreign(char* data, DType dtype, const Shape& sizes, const Shape& strides,
                      std::shared_ptr<void> keep_alive, bool read_only, const std::string& op) {
  const char* name = op.c_str();
  const int64_t isz = static_cast<int64_t>(itemsize(dtype));
  bool empty_tensor = false;
  for (int64_t s : sizes) {
    KILN_CHECK_KIND(s >= 0, Value, name, "negative size {} in shape {}", s, shape_to_string(sizes));
    empty_tensor = empty_tensor || s == 0;
  }
  // The element range the view touches, relative to `data`.
  int64_t lo = 0, hi = 0;
  if (!empty_tensor) {
    for (size_t d = 0; d < sizes.size(); ++d) {
      const int64_t span = checked_mul(sizes[d] - 1, strides[d], name);
      (span < 0 ? lo : hi) = checked_add(span < 0 ? lo : hi, span, name);
    }
  }
  // hi >= 0 >= lo, so only the distance can wrap; lo * isz fits once nbytes does.
  int64_t extent = 0;
  KILN_CHECK_KIND(!__builtin_sub_overflow(hi, lo, &extent), Value, name,
                  "a view of shape {} and strides {} spans more elements than int64 can count",
                  shape_to_string(sizes), shape_to_string(strides));
  const int64_t nbytes = empty_tensor ? 0 : checked_mul(checked_add(extent, 1, name), isz, name);
  char* base = empty_tensor ? nullptr : data + lo * isz;
  auto storage = Storage::borrow(base, static_cast<size_t>(nbytes), std::move(keep_alive));
  storage->read_only = read_only;
  return Tensor::from_storage(std::move(storage), sizes, strides, empty_tensor ? 0 : -lo, dtype);
}

}  // namespace kiln::python
