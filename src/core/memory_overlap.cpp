#include "core/memory_overlap.h"

#include <cstdint>
#include <utility>

#include "kiln/error.h"

namespace kiln {
namespace {

// Byte range [lo, hi) of the storage a non-empty view's elements occupy. Every view's
// numel and extent fit in int64 (checked when it was made), so this cannot overflow.
std::pair<int64_t, int64_t> byte_span(const Tensor& t) {
  int64_t lo = t.storage_offset(), hi = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t span = (t.size(d) - 1) * t.stride(d);
    if (span < 0) lo += span; else hi += span;
  }
  const auto item = static_cast<int64_t>(t.element_size());
  return {lo * item, (hi + 1) * item};
}

bool spans_intersect(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || a.storage() != b.storage()) return false;
  const auto [a0, a1] = byte_span(a);
  const auto [b0, b1] = byte_span(b);
  return a0 < b1 && b0 < a1;
}

[[noreturn]] void fail_overlap(const char* op) {
  fail(ErrorKind::Runtime, op,
       "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
       "memory location. Please clone() the tensor before performing the operation.");
}

}  // namespace

void check_no_internal_overlap(const Tensor& t, const char* op) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    KILN_CHECK(t.size(d) <= 1 || t.stride(d) != 0, op,
               "unsupported operation: more than one element of the written-to tensor refers to a single memory "
               "location. Please clone() the tensor before performing the operation.");
  }
}

void check_no_partial_overlap(const Tensor& written, const Tensor& read, const char* op) {
  const bool same_view = written.data_ptr() == read.data_ptr() && written.sizes() == read.sizes() &&
                         written.strides() == read.strides() && written.dtype() == read.dtype();
  if (!same_view && spans_intersect(written, read)) fail_overlap(op);
}

void check_no_overlap(const Tensor& written, const Tensor& read, const char* op) {
  if (spans_intersect(written, read)) fail_overlap(op);
}

}  // namespace kiln
