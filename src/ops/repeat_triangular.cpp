// repeat, tile, tril and triu: composites of views, expand, index_select and
// masked_fill, so autograd records them through the ops they are built from and every
// device with those kernels runs them.
#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/shape.h"
#include "kiln/tensor_limits.h"
#include "ops/op_utils.h"

namespace kiln {
namespace {

// The result sizes of repeat: t's sizes padded with leading 1s to repeats.size(), times
// the counts. PyTorch's message for a negative count is at::empty's.
// A negative count is refused only where it makes a negative size: PyTorch multiplies
// first, so an empty dim times -1 is an empty dim.
Shape repeat_target(const Shape& padded, const std::vector<int64_t>& repeats) {
  Shape target(repeats.size());
  for (size_t i = 0; i < repeats.size(); ++i) target[i] = checked_mul(padded[i], repeats[i], "repeat");
  for (size_t i = 0; i < repeats.size(); ++i) {
    KILN_CHECK(target[i] >= 0, "repeat", "Trying to create tensor with negative dimension {}: {}", target[i],
               shape_to_string(target));
  }
  shape_numel(target, "repeat");
  return target;
}

// The rank-preserving form: each repeated dim gathered with index_select over
// arange(r * s) % s. One copy per repeated dim, used only where the interleaved view
// below would need more dims than a tensor may have.
Tensor repeat_by_index(Tensor x, const std::vector<int64_t>& repeats) {
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (repeats[d] == 1) continue;
    const int64_t s = x.size(d);
    const int64_t n = s * repeats[d];  // checked by repeat_target
    Tensor index = n == 0 ? zeros({0}, DType::Int64) : remainder(arange(Scalar(n)), Scalar(s));
    x = index_select(x, d, on_device(index, x.device()));
  }
  return x;
}

Tensor triangle_outside_mask(const Tensor& t, int64_t diagonal, bool lower) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  // column - row for every position of one matrix; broadcast over the batch dims.
  const Tensor offset = sub(arange(Scalar(cols)).view({1, cols}), arange(Scalar(rows)).view({rows, 1}));
  const Tensor outside = lower ? gt(offset, Scalar(diagonal)) : lt(offset, Scalar(diagonal));
  return on_device(outside, t.device());
}

void check_matrix(const Tensor& t, const char* op) {
  check_defined(t, op, "input");
  KILN_CHECK(t.dim() >= 2, op, "input tensor must have at least 2 dimensions");
}

}  // namespace

Tensor repeat(const Tensor& t, const std::vector<int64_t>& repeats) {
  check_defined(t, "repeat", "self");
  const int64_t n = static_cast<int64_t>(repeats.size());
  KILN_CHECK(n >= t.dim(), "repeat",
             "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  check_tensor_rank(n, "repeat");
  Tensor x = t;
  while (x.dim() < n) x = x.unsqueeze(0);
  const Shape target = repeat_target(x.sizes(), repeats);
  if (shape_numel(target) == 0) {
    // Some dim is empty (possibly an empty dim "repeated" -1 times): counts of 0 there
    // give the same empty result through the same recorded ops.
    std::vector<int64_t> counts = repeats;
    for (size_t i = 0; i < counts.size(); ++i) counts[i] = target[i] == 0 ? 0 : counts[i];
    if (counts != repeats) return repeat(x, counts);
  }
  // Interleave [.., 1, s, ..] -> expand [.., r, s, ..] -> one row-major copy -> view
  // [.., r * s, ..]: the copy is the only pass over memory. A dim of size 1 (or a count
  // of 1) expands in place without a new dim.
  int64_t extra = 0;
  for (int64_t d = 0; d < n; ++d) extra += repeats[d] != 1 && x.size(d) != 1;
  if (n + extra > kMaxTensorDims) return repeat_by_index(x, repeats);
  Shape expanded;
  Tensor v = x;
  for (int64_t d = 0, pos = 0; d < n; ++d) {
    if (repeats[d] != 1 && x.size(d) != 1) {
      v = v.unsqueeze(pos);
      expanded.push_back(repeats[d]);
      expanded.push_back(x.size(d));
      pos += 2;
    } else {
      expanded.push_back(repeats[d] == 1 ? x.size(d) : repeats[d]);
      pos += 1;
    }
  }
  return v.expand(expanded).clone().view(target);
}

Tensor tile(const Tensor& t, const std::vector<int64_t>& dims) {
  check_defined(t, "tile", "self");
  std::vector<int64_t> repeats = dims;
  if (static_cast<int64_t>(repeats.size()) < t.dim()) repeats.insert(repeats.begin(), t.dim() - repeats.size(), 1);
  return repeat(t, repeats);
}

namespace {

// tril/triu and their in-place forms: zeros written outside the kept triangle.
Tensor keep_triangle(const Tensor& t, int64_t diagonal, bool lower, bool in_place, const char* op) {
  check_matrix(t, op);
  const Tensor outside = triangle_outside_mask(t, diagonal, lower);
  return in_place ? masked_fill_(t, outside, Scalar(int64_t{0})) : masked_fill(t, outside, Scalar(int64_t{0}));
}

}  // namespace

Tensor tril(const Tensor& t, int64_t diagonal) { return keep_triangle(t, diagonal, true, false, "tril"); }
Tensor triu(const Tensor& t, int64_t diagonal) { return keep_triangle(t, diagonal, false, false, "triu"); }
Tensor tril_(const Tensor& self, int64_t diagonal) { return keep_triangle(self, diagonal, true, true, "tril_"); }
Tensor triu_(const Tensor& self, int64_t diagonal) { return keep_triangle(self, diagonal, false, true, "triu_"); }

}  // namespace kiln
