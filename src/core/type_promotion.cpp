#include "kiln/type_promotion.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln {
namespace {

bool is_barebones_unsigned(DType t) {
  return t == DType::UInt16 || t == DType::UInt32 || t == DType::UInt64;
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_fp8(a) || is_fp8(b)) {
    fail(ErrorKind::Type, "promote_types", "Promotion for Float8 Types is not supported, attempted to "
         "promote {} and {} (convert explicitly with .to())", dtype_name(a), dtype_name(b));
  }
  if (is_barebones_unsigned(a) || is_barebones_unsigned(b)) {
    // PyTorch bans these: uint64 cannot promote to int64 without overflow.
    if (is_floating(a)) return a;
    if (is_floating(b)) return b;
    fail(ErrorKind::Type, "promote_types", "Promotion for uint16, uint32, uint64 types is not supported, "
         "attempted to promote {} and {}", dtype_name(a), dtype_name(b));
  }
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_complex(a) || is_complex(b)) {
    bool wide = a == DType::Complex128 || b == DType::Complex128 || a == DType::Float64 || b == DType::Float64;
    return wide ? DType::Complex128 : DType::Complex64;
  }
  if (is_floating(a) || is_floating(b)) {
    if (!is_floating(a)) return b;
    if (!is_floating(b)) return a;
    if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16)) {
      return DType::Float32;
    }
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  // Integers: uint8 with a signed type needs a wider signed type.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return itemsize(a) >= itemsize(b) ? a : b;
}

namespace {

struct PromoteState {
  bool defined = false;
  DType dtype = DType::Bool;
  void add(DType t) {
    dtype = defined ? promote_types(dtype, t) : t;
    defined = true;
  }
};

// c10's combine_categories: a lower-priority class only matters when it is of a
// higher category than everything above it.
PromoteState combine(PromoteState higher, PromoteState lower) {
  if (!higher.defined) return lower;
  if (!lower.defined) return higher;
  if (is_complex(higher.dtype)) return higher;
  if (is_complex(lower.dtype)) {
    if (is_floating(higher.dtype)) return {true, to_complex(higher.dtype)};
    return lower;
  }
  if (is_floating(higher.dtype)) return higher;
  if (higher.dtype == DType::Bool || is_floating(lower.dtype)) {
    // Only the category of lower matters here: int tensor + 2.5 -> float32.
    return {true, promote_types(higher.dtype, lower.dtype)};
  }
  return higher;
}

}  // namespace

DType result_type(std::initializer_list<PromotionOperand> operands) {
  PromoteState dim_state, zero_dim_state, wrapped_state;
  for (const auto& op : operands) {
    if (op.tensor != nullptr) {
      (op.tensor->dim() > 0 ? dim_state : zero_dim_state).add(op.tensor->dtype());
    } else {
      wrapped_state.add(op.scalar->promotion_dtype());
    }
  }
  PromoteState r = combine(dim_state, combine(zero_dim_state, wrapped_state));
  KILN_CHECK(r.defined, "result_type", "no operands");
  return r.dtype;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail(ErrorKind::Runtime, op, "the size of tensor a ({}) must match the size of tensor b ({}) at "
           "non-singleton dimension {} (shapes {} and {} cannot be broadcast)", da, db, i,
           shape_to_string(a), shape_to_string(b));
    }
    out[i] = da == 1 ? db : da;
  }
  // Ops allocate or walk the broadcast shape: two views whose numel fits can broadcast
  // to one whose numel does not ([n, 1] and [1, n]).
  int64_t numel = 0;
  if (!try_shape_numel(out, &numel)) {
    fail(ErrorKind::Runtime, op, "numel: integer multiplication overflow: shapes {} and {} broadcast to {}, which has "
         "more elements than int64 can count", shape_to_string(a), shape_to_string(b), shape_to_string(out));
  }
  return out;
}

Shape broadcast_shapes(const std::vector<Shape>& shapes, const char* op) {
  Shape out;
  for (const auto& s : shapes) out = broadcast_shapes(out, s, op);
  return out;
}

}  // namespace kiln
