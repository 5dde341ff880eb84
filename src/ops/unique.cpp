// unique and unique_consecutive: a stable sort (lexicographic over slices with a dim),
// then a compare of neighbours marks where each run of equal values starts; the run
// starts give the values, their running count the inverse indices, and a bincount of
// those the counts. Composites of public ops, so autograd records the values' path.
#include "kiln/error.h"
#include "kiln/ops/advanced_index.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/index_extra.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/unique.h"
#include "ops/op_utils.h"

namespace kiln {
namespace {

// True where line i (an element, or a row of a 2-D tensor) starts a run: i == 0 or it
// differs from line i - 1. NaN differs from everything, itself included.
Tensor run_starts(const Tensor& lines) {
  const int64_t n = lines.size(0);
  if (n == 0) return on_device(zeros({0}, DType::Bool), lines.device());
  Tensor differs = ne(lines.slice(0, 1, n), lines.slice(0, 0, n - 1));
  if (differs.dim() == 2) differs = gt(sum(differs, {1}), Scalar(int64_t{0}));
  return cat({on_device(ones({1}, DType::Bool), lines.device()), differs}, 0);
}

// The row order that sorts `rows` [n, m] lexicographically: stable sorts by the last
// column first, then each column before it (a radix sort over columns).
Tensor lexicographic_order(const Tensor& rows) {
  const Tensor keys = rows.detach();
  Tensor order = on_device(arange(Scalar(rows.size(0))), rows.device());
  for (int64_t j = rows.size(1) - 1; j >= 0; --j) {
    const Tensor column = index_select(keys.select(1, j), 0, order);
    order = index_select(order, 0, sort(column, 0, false, true).indices);
  }
  return order;
}

// Fills inverse_indices (in the input's order, through `order` when the lines were
// sorted) and counts from the run starts of the sorted lines.
void inverse_and_counts(UniqueResult& r, const Tensor& starts, const Tensor& order, const Shape& inverse_shape,
                        bool return_inverse, bool return_counts) {
  if (!return_inverse && !return_counts) return;
  const Tensor run = sub(cumsum(starts, 0), Scalar(int64_t{1}));  // run number of each sorted line
  if (return_inverse) {
    Tensor inverse = run;
    if (order.defined()) {
      inverse = Tensor::empty(run.sizes(), DType::Int64, run.device(), "unique");
      put_(inverse, order, run);
    }
    r.inverse_indices = inverse.reshape(inverse_shape);
  }
  if (return_counts) r.counts = bincount(run, std::nullopt, r.values.size(0));
}

UniqueResult unique_elements(const Tensor& input, bool consecutive, bool return_inverse, bool return_counts) {
  const Tensor flat = input.reshape({-1});
  Tensor lines = flat, order;
  if (!consecutive) {
    ValuesIndices s = sort(flat, 0, false, true);
    lines = s.values;
    order = s.indices;
  }
  const Tensor starts = run_starts(lines);
  UniqueResult r;
  r.values = index_select(lines, 0, nonzero(starts).reshape({-1}));
  inverse_and_counts(r, starts, order, input.sizes(), return_inverse, return_counts);
  return r;
}

UniqueResult unique_slices(const char* op, const Tensor& input, int64_t dim, bool consecutive, bool return_inverse,
                           bool return_counts) {
  KILN_CHECK_KIND(input.dim() > 0, Index, op, "Dimension specified as {} but tensor has no dimensions", dim);
  const int64_t d = wrap_dim(dim, input.dim(), op);
  int64_t empty_dims = 0;
  for (int64_t s : input.sizes()) empty_dims += s == 0;
  const Tensor moved = input.movedim(d, 0);
  const int64_t n = moved.size(0);
  UniqueResult r;
  if (n == 0) {
    KILN_CHECK(empty_dims == 1, op, "Number of zero sized dimensions is more than one, so unique cannot be applied ");
    r.values = input.clone();
    if (return_inverse) r.inverse_indices = on_device(zeros({0}, DType::Int64), input.device());
    if (return_counts) r.counts = on_device(zeros({0}, DType::Int64), input.device());
    return r;
  }
  KILN_CHECK(empty_dims == 0, op, "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  const Tensor rows = moved.reshape({n, -1});
  Tensor order;
  if (!consecutive) order = lexicographic_order(rows);
  const Tensor sorted_rows = order.defined() ? index_select(rows, 0, order) : rows;
  const Tensor starts = run_starts(sorted_rows);
  const Tensor positions = nonzero(starts).reshape({-1});
  const Tensor taken = order.defined() ? index_select(order, 0, positions) : positions;
  r.values = index_select(moved, 0, taken).movedim(0, d);
  inverse_and_counts(r, starts, order, {n}, return_inverse, return_counts);
  return r;
}

}  // namespace

UniqueResult unique(const Tensor& input, bool sorted, bool return_inverse, bool return_counts,
                    std::optional<int64_t> dim) {
  (void)sorted;  // always sorted: a valid order for sorted=false too
  const char* op = dim ? "unique_dim" : "unique";
  check_defined(input, op, "input");
  // PyTorch's dispatch error, a RuntimeError.
  KILN_CHECK(!is_complex(input.dtype()), op, "\"unique\" not implemented for '{}'", torch_type_name(input.dtype()));
  if (dim) return unique_slices(op, input, *dim, false, return_inverse, return_counts);
  return unique_elements(input, false, return_inverse, return_counts);
}

UniqueResult unique_consecutive(const Tensor& input, bool return_inverse, bool return_counts,
                                std::optional<int64_t> dim) {
  check_defined(input, "unique_consecutive", "input");
  if (dim) return unique_slices("unique_consecutive", input, *dim, true, return_inverse, return_counts);
  return unique_elements(input, true, return_inverse, return_counts);
}

}  // namespace kiln
