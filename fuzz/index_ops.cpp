// The ops whose kernels walk raw strides (gather, scatter, index_select, sorts, scans,
// advanced indexing, take/put, flip, pad, cat, masked ops, where, reductions over dims,
// softmax, matmul, embedding...) on operands laid out in hostile ways. The input is a
// small program like shape_ops': up to 24 operations on a stack of four tensors, each
// either a view op (shape_ops' own) or an op that computes. An operand that computes
// is first relaid out at random: dims in any memory order, gaps between elements,
// negative strides, and any stride at all (2^61, 2^63 - 1, INT64_MIN...) on a dim of one
// element or on a tensor with no element, which PyTorch allows and which a kernel must
// never scale to bytes. Index tensors get in-range, negative and edge entries, int64 or
// int32, at such layouts too.
//
// Beyond "no crash, only kiln::Error" and shape_ops' invariants on every tensor handed
// out, each op that computes also runs on contiguous copies of its operands: both runs
// must accept or both refuse, and give the same sizes, dtype and (where the op is exact
// for these inputs) the same bytes. Work stays bounded as in shape_ops: operands of at
// most kMaxComputeElements, index tensors of a few elements, pads that would allocate
// more than a few thousand elements skipped.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/advanced_index.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/index_extra.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pad.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "kiln/tensor.h"
#include "tensor_program.h"

namespace {

using kiln::DType;
using kiln::Scalar;
using kiln::Shape;
using kiln::Tensor;
using namespace kiln::fuzz;

constexpr size_t kMaxOps = 24;
constexpr size_t kStackSize = 4;
constexpr int64_t kMaxIndexSize = 4;     // per dim of an index tensor
constexpr int64_t kMaxPadOutput = 4096;  // elements

// Small integers with repeats (ties for the sorts): exact in every dtype, and sums and
// products of a few of them stay exact in float accumulators whatever their order.
Tensor small_values(const Shape& sizes, DType dt) {
  const int64_t n = checked_numel(sizes).value();
  const Tensor i = kiln::arange(Scalar(n), DType::Int64);
  return kiln::remainder(kiln::mul(i, Scalar(int64_t{7})), Scalar(int64_t{11})).to(dt).view(sizes);
}

// A new contiguous tensor holding t's values (never t itself).
Tensor dense_copy(const Tensor& t) {
  Tensor c = kiln::empty(t.sizes(), t.dtype());
  c.copy_(t);
  return c;
}

// t's values at a layout drawn from `in`: as it is, or new memory walked in any dim
// order, with gaps, negative strides, and any stride on dims that are never stepped.
Tensor odd_layout(FuzzInput& in, const Tensor& t) {
  const uint8_t how = in.byte();
  if (how % 4 == 0) return t;
  const int64_t rank = t.dim();
  std::vector<int64_t> order(static_cast<size_t>(rank));  // innermost first
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = 1; i < order.size(); ++i) std::swap(order[i], order[in.below(i + 1)]);
  const bool empty = t.numel() == 0;
  int64_t run = 1 + static_cast<int64_t>(in.below(3));  // the gap between neighbours
  int64_t offset = 0, extent = 0;
  Shape strides(static_cast<size_t>(rank));
  for (const int64_t d : order) {
    const int64_t size = t.size(d);
    auto& stride = strides[static_cast<size_t>(d)];
    if (size <= 1 || empty) {
      stride = number(in);  // never stepped: anything goes
      continue;
    }
    stride = run;
    if ((how & 4) != 0 && in.flag()) {
      stride = -run;
      offset += (size - 1) * run;
    }
    extent += (size - 1) * run;
    run *= size;  // at most 3 * kMaxComputeElements
  }
  try {
    const Tensor buffer = kiln::zeros({extent + 1}, t.dtype());
    Tensor v = buffer.as_strided(t.sizes(), strides, offset);
    v.copy_(t);
    return v;
  } catch (const kiln::Error&) {
    return t;  // an empty tensor's strides whose span overflows: refused, as it should be
  }
}

// A dim of t: mostly a valid one (either sign), sometimes any number.
int64_t dim_of(FuzzInput& in, const Tensor& t) {
  const uint8_t b = in.byte();
  const int64_t n = std::max<int64_t>(t.dim(), 1);
  if (b < 128) return b % n;
  if (b < 224) return -1 - b % n;
  return number(in);
}

kiln::DimList dims_of(FuzzInput& in, const Tensor& t) {
  kiln::DimList dims(in.below(4));
  for (auto& d : dims) d = dim_of(in, t);
  return dims;
}

// An index tensor: entries mostly in [0, bound), some negative (from the end, or out of
// range), some edges; int64 or int32; at an odd layout.
Tensor index_tensor(FuzzInput& in, const Shape& sizes, int64_t bound) {
  Tensor index = kiln::empty(sizes, DType::Int64);
  int64_t* p = index.data<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i) {
    const uint8_t b = in.byte();
    if (bound > 0 && b < 200) {
      p[i] = b % bound;
    } else if (bound > 0 && b < 230) {
      p[i] = -1 - b % bound;
    } else {
      p[i] = number(in);
    }
  }
  if (in.flag()) index = index.to(DType::Int32);
  return odd_layout(in, index);
}

Shape small_shape(FuzzInput& in, size_t rank) {
  Shape sizes(rank);
  for (auto& s : sizes) s = static_cast<int64_t>(in.below(kMaxIndexSize + 1));
  return sizes;
}

// t's sizes with some dims set to 1 and some leading dims dropped: broadcastable to t.
Shape broadcastable_shape(FuzzInput& in, const Tensor& t) {
  Shape sizes(t.sizes().begin() + static_cast<int64_t>(in.below(static_cast<size_t>(t.dim()) + 1)), t.sizes().end());
  for (auto& s : sizes) {
    if (in.below(4) == 0) s = 1;
  }
  return sizes;
}

// A bool tensor broadcastable to t, at an odd layout.
Tensor mask_for(FuzzInput& in, const Tensor& t) {
  const Shape sizes = broadcastable_shape(in, t);
  Tensor mask = kiln::empty(sizes, DType::Bool);
  bool* p = mask.data<bool>();
  for (int64_t i = 0; i < mask.numel(); ++i) p[i] = in.flag();
  return odd_layout(in, mask);
}

// Whether t holds only integers of magnitude at most 64 (no NaN, no complex): then sums,
// dot products and scans of up to kMaxComputeElements of them are exact in any order.
bool small_integers(const Tensor& t) {
  if (t.dtype() == DType::Complex64) return false;
  const Tensor d = t.to(DType::Float64).contiguous();
  const double* p = d.data<double>();
  for (int64_t i = 0; i < d.numel(); ++i) {
    if (!(std::fabs(p[i]) <= 64) || p[i] != std::floor(p[i])) return false;
  }
  return true;
}

bool all_small_integers(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (t.defined() && !small_integers(t)) return false;
  }
  return true;
}

bool integral(DType dt) {
  return dt == DType::Int64 || dt == DType::Int32 || dt == DType::Int8 || dt == DType::UInt8 ||
         dt == DType::UInt64 || dt == DType::Bool;
}

void check_same(const Tensor& got, const Tensor& want, bool values, const char* op) {
  if (got.sizes() != want.sizes() || got.dtype() != want.dtype()) {
    finding(std::string(op) + ": strided operands gave " + describe(got) + ", their contiguous copies " +
            describe(want));
  }
  if (!values || got.numel() == 0) return;
  const Tensor g = got.contiguous(), w = want.contiguous();
  if (std::memcmp(g.data_ptr(), w.data_ptr(), static_cast<size_t>(g.numel()) * g.element_size()) != 0) {
    finding(std::string(op) + ": strided operands gave other values than their contiguous copies: " + describe(got) +
            "\n" + got.str() + "\nwant\n" + want.str());
  }
}

enum class Compare { Shape, Values };

// Runs `f` on the operands as they are and on contiguous copies of them (f may write
// into its first operand: each run has its own). Both must succeed or both raise
// kiln::Error; when they succeed, the results agree in shape and dtype, and in bytes
// when `compare` says the op is exact for these operands. Returns the first run's
// result, or rethrows its error.
template <typename F>
std::vector<Tensor> on_both(const char* op, Compare compare, const std::vector<Tensor>& operands, F&& f) {
  std::vector<Tensor> dense;
  for (const Tensor& t : operands) dense.push_back(t.defined() ? dense_copy(t) : t);
  std::vector<Tensor> got, want;
  std::exception_ptr got_error, want_error;
  std::string want_message;
  try {
    got = f(operands);
  } catch (const kiln::Error&) {
    got_error = std::current_exception();
  }
  try {
    want = f(dense);
  } catch (const kiln::Error& e) {
    want_error = std::current_exception();
    want_message = e.what();
  }
  if (!got_error && want_error) {
    finding(std::string(op) + ": the strided operands were accepted, their contiguous copies refused: " +
            want_message);
  }
  if (got_error && !want_error) {
    try {
      std::rethrow_exception(got_error);
    } catch (const kiln::Error& e) {
      finding(std::string(op) + ": the strided operands were refused, their contiguous copies accepted: " + e.what() +
              "\nfirst operand: " + describe(operands.at(0)));
    }
  }
  if (got_error) std::rethrow_exception(got_error);
  for (size_t i = 0; i < got.size(); ++i) check_same(got[i], want.at(i), compare == Compare::Values, op);
  return got;
}

// Exact for these operands: no accumulation, or integer dtypes, or small integers.
Compare exact_if(bool exact) { return exact ? Compare::Values : Compare::Shape; }

using Operands = std::vector<Tensor>;
using Results = std::vector<Tensor>;

// Sizes of an index for gather/scatter on x along dim: x's rank, at most x's size on the
// other dims (sometimes more, which must be refused).
Shape gather_index_shape(FuzzInput& in, const Tensor& x, int64_t dim) {
  Shape sizes(static_cast<size_t>(x.dim()));
  const bool free = in.below(8) == 0;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t limit = d == dim || free ? kMaxIndexSize : x.size(d);
    sizes[static_cast<size_t>(d)] = static_cast<int64_t>(in.below(static_cast<size_t>(limit) + 1));
  }
  return sizes;
}

int64_t size_along(const Tensor& x, int64_t dim) {
  if (x.dim() == 0) return 1;
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  return d >= 0 && d < x.dim() ? x.size(d) : 1;
}

int64_t wrapped(const Tensor& x, int64_t dim) { return dim < 0 && x.dim() > 0 ? dim + x.dim() : dim; }

kiln::IndexList index_list(FuzzInput& in, const Tensor& x) {
  kiln::IndexList list(in.below(static_cast<size_t>(x.dim()) + 2));
  for (size_t d = 0; d < list.size(); ++d) {
    const uint8_t b = in.byte();
    if (b % 4 == 0) continue;  // a full slice
    const int64_t size = static_cast<int64_t>(d) < x.dim() ? x.size(static_cast<int64_t>(d)) : 1;
    if (b % 4 == 1) {  // a mask over this dim
      Tensor mask = kiln::empty({in.flag() ? size : static_cast<int64_t>(in.below(kMaxIndexSize))}, DType::Bool);
      for (int64_t i = 0; i < mask.numel(); ++i) mask.data<bool>()[i] = in.flag();
      list[d] = odd_layout(in, mask);
    } else {
      list[d] = index_tensor(in, small_shape(in, in.below(3)), size);
    }
  }
  return list;
}

// The index list's tensors appended to `operands`, and a function rebuilding the list
// from the operands that follow the first `first`.
struct PackedIndices {
  std::vector<bool> present;
  kiln::IndexList unpack(const Operands& t, size_t first) const {
    kiln::IndexList list(present.size());
    for (size_t i = 0, k = first; i < present.size(); ++i) {
      if (present[i]) list[i] = t[k++];
    }
    return list;
  }
};

PackedIndices pack(const kiln::IndexList& list, Operands& operands) {
  PackedIndices packed;
  for (const auto& index : list) {
    packed.present.push_back(index.has_value());
    if (index) operands.push_back(*index);
  }
  return packed;
}

// Pads that keep the output small, or overflow (which must be refused).
std::optional<std::vector<int64_t>> pads_for(FuzzInput& in, const Tensor& x) {
  std::vector<int64_t> pads(in.below(7));
  for (auto& p : pads) {
    const uint8_t b = in.byte();
    p = b < 224 ? static_cast<int64_t>(b % 9) - 4 : number(in);
  }
  // The output's element count, saturated just past kMaxPadOutput.
  constexpr __int128 kBig = kMaxPadOutput + 1;
  __int128 total = 1;
  bool overflows = false;
  for (int64_t d = 0; d < x.dim(); ++d) {
    __int128 size = x.size(d);
    const size_t from_end = static_cast<size_t>(x.dim() - 1 - d);
    if (2 * from_end + 1 < pads.size()) size += static_cast<__int128>(pads[2 * from_end]) + pads[2 * from_end + 1];
    overflows |= size > INT64_MAX || size < INT64_MIN;
    total = std::min(total * std::clamp<__int128>(size, 1, kBig), kBig);
  }
  if (!overflows && total > kMaxPadOutput) return std::nullopt;  // legal, only big
  return pads;
}

// A second matmul operand fitting x (or not, sometimes).
Shape matmul_partner(FuzzInput& in, const Tensor& x) {
  const int64_t k = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t k_or_other = in.below(8) == 0 ? static_cast<int64_t>(in.below(6)) : k;
  switch (in.below(3)) {
    case 0: return {k_or_other};
    case 1: return {k_or_other, static_cast<int64_t>(in.below(5))};
    default: {
      const int64_t batch = x.dim() >= 3 ? x.size(-3) : 1;
      return {batch, k_or_other, static_cast<int64_t>(in.below(5))};
    }
  }
}

std::optional<Tensor> first(const Results& r) { return r.empty() ? std::nullopt : std::optional<Tensor>(r[0]); }

// Runs one operation and returns its result, or nothing when it was refused (or skipped
// because it would be too much work).
std::optional<Tensor> step(FuzzInput& in, const std::array<Tensor, kStackSize>& stack, const char*& op) {
  const Tensor& a = stack[in.below(kStackSize)];
  const Tensor& b = stack[in.below(kStackSize)];
  const uint8_t kind = in.byte() % 28;
  if (kind < 3) return view_op(static_cast<int>(in.below(kViewOps)), in, a, op);
  if (kind == 3) {
    op = "base";
    const Shape sizes = small_shape(in, in.below(4));
    return odd_layout(in, small_values(sizes, dtype(in)));
  }
  if (!computable(a) || !computable(b)) return std::nullopt;
  const Tensor x = odd_layout(in, a);
  const bool exact_dtype = integral(x.dtype());
  // What an op writes into: x's values in memory of their own, so that a view that
  // overlaps itself (expanded) is not compared with its dense copy.
  const auto target = [&] { return odd_layout(in, dense_copy(x)); };
  switch (kind) {
    case 4: {
      op = "gather";
      const int64_t dim = dim_of(in, x);
      const Tensor index = index_tensor(in, gather_index_shape(in, x, wrapped(x, dim)), size_along(x, dim));
      return first(on_both(op, Compare::Values, {x, index},
                           [&](const Operands& t) { return Results{kiln::gather(t[0], dim, t[1])}; }));
    }
    case 5: {
      op = "scatter_add";
      const int64_t dim = dim_of(in, x);
      const Tensor index = index_tensor(in, gather_index_shape(in, x, wrapped(x, dim)), size_along(x, dim));
      Shape src_sizes = index.sizes();
      for (auto& s : src_sizes) s += static_cast<int64_t>(in.below(2));
      const Tensor src = odd_layout(in, small_values(src_sizes, x.dtype()));
      const bool in_place = in.flag();
      const Tensor self = in_place ? target() : x;
      return first(on_both(op, exact_if(exact_dtype || all_small_integers({x, src})), {self, index, src},
                           [&](const Operands& t) {
                             if (in_place) return Results{kiln::scatter_add_(t[0], dim, t[1], t[2])};
                             return Results{kiln::scatter_add(t[0], dim, t[1], t[2])};
                           }));
    }
    case 6: {
      op = "index_add";
      const int64_t dim = dim_of(in, x);
      const Tensor index = index_tensor(in, small_shape(in, in.below(2)), size_along(x, dim));
      Shape src_sizes = x.sizes();
      const int64_t w = wrapped(x, dim);
      if (w >= 0 && w < x.dim()) src_sizes[static_cast<size_t>(w)] = index.numel();
      const Tensor src = odd_layout(in, small_values(src_sizes, x.dtype()));
      const Scalar alpha(static_cast<int64_t>(in.below(3)));
      const bool in_place = in.flag();
      const Tensor self = in_place ? target() : x;
      return first(on_both(op, exact_if(exact_dtype || all_small_integers({x, src})), {self, index, src},
                           [&](const Operands& t) {
                             if (in_place) return Results{kiln::index_add_(t[0], dim, t[1], t[2], alpha)};
                             return Results{kiln::index_add(t[0], dim, t[1], t[2], alpha)};
                           }));
    }
    case 7: {
      op = "index_select";
      const int64_t dim = dim_of(in, x);
      const Tensor index = index_tensor(in, small_shape(in, in.below(2)), size_along(x, dim));
      return first(on_both(op, Compare::Values, {x, index},
                           [&](const Operands& t) { return Results{kiln::index_select(t[0], dim, t[1])}; }));
    }
    case 8: {
      op = "sort";
      const int64_t dim = dim_of(in, x);
      const bool descending = in.flag(), stable = in.flag(), arg = in.flag();
      const Results r = on_both(op, Compare::Values, {x}, [&](const Operands& t) {
        if (arg) return Results{kiln::argsort(t[0], dim, descending, stable)};
        const kiln::ValuesIndices s = kiln::sort(t[0], dim, descending, stable);
        return Results{s.values, s.indices};
      });
      return r.back();
    }
    case 9: {
      op = "topk";
      const int64_t dim = dim_of(in, x);
      const int64_t k = in.below(16) == 0 ? number(in) : static_cast<int64_t>(in.below(size_along(x, dim) + 2));
      const bool largest = in.flag(), sorted = in.flag();
      // Unsorted, the k may come in any order: compare them only when sorted.
      const Results r = on_both(op, exact_if(sorted), {x}, [&](const Operands& t) {
        const kiln::ValuesIndices s = kiln::topk(t[0], k, dim, largest, sorted);
        return Results{s.values, s.indices};
      });
      return r[in.below(2)];
    }
    case 10: {
      op = "cumsum";
      const int64_t dim = dim_of(in, x);
      const std::optional<DType> dt = in.flag() ? std::optional<DType>(dtype(in)) : std::nullopt;
      return first(on_both(op, exact_if(exact_dtype || small_integers(x)), {x},
                           [&](const Operands& t) { return Results{kiln::cumsum(t[0], dim, dt)}; }));
    }
    case 11: {
      op = "index";
      Operands operands{x};
      const PackedIndices packed = pack(index_list(in, x), operands);
      return first(on_both(op, Compare::Values, operands,
                           [&](const Operands& t) { return Results{kiln::index(t[0], packed.unpack(t, 1))}; }));
    }
    case 12: {
      op = "index_put_";
      Operands operands{target()};
      const PackedIndices packed = pack(index_list(in, x), operands);
      const bool accumulate = in.flag();
      Shape value_sizes;
      if (in.flag()) {
        try {
          value_sizes = kiln::index(dense_copy(x), packed.unpack(operands, 1)).sizes();
        } catch (const kiln::Error&) {
        }
        if (!value_sizes.empty() && in.flag()) value_sizes.erase(value_sizes.begin());  // broadcast
      }
      operands.insert(operands.begin() + 1, odd_layout(in, small_values(value_sizes, x.dtype())));
      // Without accumulate, repeated indices leave any one of their values (PyTorch):
      // only the shapes are compared then.
      const Compare compare = accumulate ? exact_if(exact_dtype || all_small_integers(operands)) : Compare::Shape;
      return first(on_both(op, compare, operands, [&](const Operands& t) {
        return Results{kiln::index_put_(t[0], packed.unpack(t, 2), t[1], accumulate)};
      }));
    }
    case 13: {
      op = "take/put_";
      const Tensor index = index_tensor(in, small_shape(in, in.below(3)), x.numel());
      if (in.flag()) {
        return first(on_both(op, Compare::Values, {x, index},
                             [&](const Operands& t) { return Results{kiln::take(t[0], t[1])}; }));
      }
      const Tensor source = odd_layout(in, small_values(index.sizes(), x.dtype()));
      const bool accumulate = in.flag();
      const Compare compare = accumulate ? exact_if(exact_dtype || all_small_integers({x, source})) : Compare::Shape;
      return first(on_both(op, compare, {target(), index, source},
                           [&](const Operands& t) { return Results{kiln::put_(t[0], t[1], t[2], accumulate)}; }));
    }
    case 14: {
      op = "flip";
      const kiln::DimList dims = dims_of(in, x);
      return first(on_both(op, Compare::Values, {x}, [&](const Operands& t) { return Results{kiln::flip(t[0], dims)}; }));
    }
    case 15: {
      op = "pad";
      const auto pads = pads_for(in, x);
      if (!pads) return std::nullopt;
      static constexpr const char* kModes[] = {"constant", "constant", "reflect", "replicate", "circular"};
      const char* mode = kModes[in.below(std::size(kModes))];
      const std::optional<double> value = in.flag() ? std::optional<double>(3.0) : std::nullopt;
      return first(on_both(op, Compare::Values, {x},
                           [&](const Operands& t) { return Results{kiln::pad(t[0], *pads, mode, value)}; }));
    }
    case 16: {
      op = "cat/stack";
      const Tensor y = odd_layout(in, b);
      const int64_t dim = dim_of(in, x);
      const bool stack_them = in.flag();
      return first(on_both(op, Compare::Values, {x, y, x}, [&](const Operands& t) {
        return Results{stack_them ? kiln::stack({t[0], t[1], t[2]}, dim) : kiln::cat({t[0], t[1], t[2]}, dim)};
      }));
    }
    case 17: {
      op = "masked_fill/masked_select";
      const Tensor mask = mask_for(in, x);
      const uint8_t which = in.byte() % 3;
      return first(on_both(op, Compare::Values, {which == 2 ? target() : x, mask}, [&](const Operands& t) {
        if (which == 0) return Results{kiln::masked_select(t[0], t[1])};
        if (which == 1) return Results{kiln::masked_fill(t[0], t[1], Scalar(int64_t{5}))};
        return Results{kiln::masked_fill_(t[0], t[1], Scalar(int64_t{5}))};
      }));
    }
    case 18: {
      op = "where";
      const Tensor cond = mask_for(in, x);
      const Tensor y = odd_layout(in, small_values(broadcastable_shape(in, x), dtype(in)));
      return first(on_both(op, Compare::Values, {cond, x, y},
                           [&](const Operands& t) { return Results{kiln::where(t[0], t[1], t[2])}; }));
    }
    case 19: {
      op = "reduction over dims";
      const kiln::DimList dims = dims_of(in, x);
      const bool keepdim = in.flag();
      const uint8_t which = in.byte() % 9;
      // Sums are exact on integers; products only in integer dtypes (they wrap alike in
      // any order); amax, amin, argmax, argmin always; var and norm never.
      const bool exact = which <= 1 ? exact_dtype || small_integers(x) : which == 2 ? exact_dtype : which <= 6;
      return first(on_both(op, exact_if(exact), {x}, [&](const Operands& t) {
        const std::optional<int64_t> one = dims.empty() ? std::nullopt : std::optional<int64_t>(dims[0]);
        switch (which) {
          case 0: return Results{kiln::sum(t[0], dims, keepdim)};
          case 1: return Results{kiln::mean(t[0], dims, keepdim)};
          case 2: return Results{kiln::prod(t[0], dims, keepdim)};
          case 3: return Results{kiln::amax(t[0], dims, keepdim)};
          case 4: return Results{kiln::amin(t[0], dims, keepdim)};
          case 5: return Results{kiln::argmax(t[0], one, keepdim)};
          case 6: return Results{kiln::argmin(t[0], one, keepdim)};
          case 7: return Results{kiln::var(t[0], dims, 1.0, keepdim)};
          default: return Results{kiln::norm(t[0], 2.0, dims, keepdim)};
        }
      }));
    }
    case 20: {
      op = "transpose/contiguous/to";
      const int64_t d0 = dim_of(in, x), d1 = dim_of(in, x);
      const DType to = dtype(in);
      return first(on_both(op, Compare::Values, {x}, [&](const Operands& t) {
        const Tensor moved = t[0].transpose(d0, d1);
        return Results{moved.contiguous(), moved.clone(), moved.to(to)};
      }));
    }
    case 21: {
      op = "softmax";
      const int64_t dim = dim_of(in, x);
      const bool log = in.flag();
      return first(on_both(op, Compare::Shape, {x}, [&](const Operands& t) {
        return Results{log ? kiln::log_softmax(t[0], dim) : kiln::softmax(t[0], dim)};
      }));
    }
    case 22: {
      op = "matmul";
      const Tensor y = odd_layout(in, small_values(matmul_partner(in, x), x.dtype()));
      const uint8_t which = in.byte() % 5;
      return first(on_both(op, exact_if(all_small_integers({x, y})), {x, y}, [&](const Operands& t) {
        switch (which) {
          case 0: return Results{kiln::mm(t[0], t[1])};
          case 1: return Results{kiln::bmm(t[0], t[1])};
          case 2: return Results{kiln::mv(t[0], t[1])};
          case 3: return Results{kiln::dot(t[0], t[1])};
          default: return Results{kiln::matmul(t[0], t[1])};
        }
      }));
    }
    case 23: {
      op = "embedding";
      const Tensor index = index_tensor(in, small_shape(in, in.below(3)), x.dim() > 0 ? x.size(0) : 0);
      const std::optional<int64_t> padding = in.flag() ? std::optional<int64_t>(dim_of(in, x)) : std::nullopt;
      return first(on_both(op, Compare::Values, {x, index},
                           [&](const Operands& t) { return Results{kiln::embedding(t[0], t[1], padding)}; }));
    }
    case 24: {
      op = "nonzero/bincount";
      if (in.flag()) {
        return first(on_both(op, Compare::Values, {x}, [&](const Operands& t) { return Results{kiln::nonzero(t[0])}; }));
      }
      const Tensor values = index_tensor(in, small_shape(in, in.below(2)), 8);
      // A value v asks for v + 1 bins (as in PyTorch): legal, only big past the bound.
      const Tensor wide = values.to(DType::Int64).contiguous();
      const int64_t* v = wide.data<int64_t>();
      if (std::any_of(v, v + wide.numel(), [](int64_t x) { return x > kMaxComputeElements; })) return std::nullopt;
      const Tensor weights = odd_layout(in, small_values(values.sizes(), in.flag() ? DType::Float64 : x.dtype()));
      const bool weighted = in.flag();
      const int64_t minlength = static_cast<int64_t>(in.below(8)) - 1;
      return first(on_both(op, Compare::Values, {values, weights}, [&](const Operands& t) {
        return Results{kiln::bincount(t[0], weighted ? std::optional<Tensor>(t[1]) : std::nullopt, minlength)};
      }));
    }
    case 25: {
      op = "binary elementwise";
      // Broadcast either way round; each element's result does not depend on the layout.
      const Tensor y = odd_layout(in, small_values(broadcastable_shape(in, x), dtype(in)));
      const bool swap = in.flag();
      const uint8_t which = in.byte() % 5;
      const Tensor own = which == 4 ? target() : x;  // add_ writes into the first
      return first(on_both(op, Compare::Values, swap ? Operands{y, own} : Operands{own, y}, [&](const Operands& t) {
        switch (which) {
          case 0: return Results{kiln::add(t[0], t[1])};
          case 1: return Results{kiln::mul(t[0], t[1])};
          case 2: return Results{kiln::maximum(t[0], t[1])};
          case 3: return Results{kiln::eq(t[0], t[1])};
          default: {
            Tensor self = t[0];
            return Results{kiln::add_(self, t[1])};
          }
        }
      }));
    }
    case 26: {
      // In place on the stack's own view, which may overlap itself (expanded) or carry
      // any layout: only memory safety and the invariants are checked.
      op = "in place on a view";
      Tensor self = a;
      const int64_t dim = dim_of(in, a);
      switch (in.byte() % 5) {
        case 0: {
          const Tensor index = index_tensor(in, gather_index_shape(in, a, wrapped(a, dim)), size_along(a, dim));
          return kiln::scatter_add_(self, dim, index, small_values(index.sizes(), a.dtype()));
        }
        case 1: {
          const Tensor index = index_tensor(in, {static_cast<int64_t>(in.below(3))}, size_along(a, dim));
          Shape src_sizes = a.sizes();
          const int64_t w = wrapped(a, dim);
          if (w >= 0 && w < a.dim()) src_sizes[static_cast<size_t>(w)] = index.numel();
          return kiln::index_add_(self, dim, index, small_values(src_sizes, a.dtype()));
        }
        case 2:
          return kiln::masked_fill_(self, mask_for(in, a), Scalar(int64_t{2}));
        case 3:
          return kiln::index_put_(self, index_list(in, a), small_values({}, a.dtype()), in.flag());
        default: {
          const Tensor index = index_tensor(in, small_shape(in, 1), a.numel());
          return kiln::put_(self, index, small_values(index.sizes(), a.dtype()), in.flag());
        }
      }
    }
    default: {
      op = "norms";
      const int64_t last = in.below(static_cast<size_t>(x.dim()) + 1);
      const Shape normalized(x.sizes().end() - last, x.sizes().end());
      const bool layer = in.flag();
      return first(on_both(op, Compare::Shape, {x}, [&](const Operands& t) {
        return Results{layer ? kiln::layer_norm(t[0], normalized) : kiln::rms_norm(t[0], normalized)};
      }));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  std::array<Tensor, kStackSize> stack;
  for (auto& t : stack) t = small_values(small_shape(in, in.below(4)), dtype(in));
  run_program<kMaxOps>(in, stack, step);
  return 0;
}
