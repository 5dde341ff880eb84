// Integer and bool reductions: Sum, Prod, Max, Min, ArgMax, ArgMin. Plain loops that
// the compiler vectorises (integer arithmetic has no rounding, so order is free).
// Sums and products accumulate in 64 bits and wrap, as PyTorch's int64 results do.
#include <cstdint>
#include <type_traits>

#include "backend/cpu/reduce/reduce_kernels.h"
#include "kiln/error.h"

namespace kiln::cpu {
namespace {

// The 64-bit type a value of T widens to (so the sign is kept), stored in
// ReducePartial::i as int64 bits.
template <class T>
using Wide = std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>;

template <class T>
int64_t to_bits(T v) { return static_cast<int64_t>(static_cast<Wide<T>>(v)); }
template <class T>
Wide<T> from_bits(int64_t bits) { return static_cast<Wide<T>>(bits); }

template <class T>
void row_sum(const void* xv, int64_t n, int64_t, const ReduceParams&, ReducePartial* out) {
  const T* x = static_cast<const T*>(xv);
  uint64_t acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<uint64_t>(static_cast<Wide<T>>(x[i]));
  *out = ReducePartial{};
  out->i = static_cast<int64_t>(acc);
}

template <class T>
void row_prod(const void* xv, int64_t n, int64_t, const ReduceParams&, ReducePartial* out) {
  const T* x = static_cast<const T*>(xv);
  uint64_t acc = 1;
  for (int64_t i = 0; i < n; ++i) acc *= static_cast<uint64_t>(static_cast<Wide<T>>(x[i]));
  *out = ReducePartial{};
  out->i = static_cast<int64_t>(acc);
}

template <class T, bool kMax>
T row_extreme_value(const T* x, int64_t n) {
  T best = x[0];
  for (int64_t i = 1; i < n; ++i) best = (kMax ? x[i] > best : x[i] < best) ? x[i] : best;
  return best;
}

template <class T, bool kMax>
void row_extreme(const void* xv, int64_t n, int64_t, const ReduceParams&, ReducePartial* out) {
  *out = ReducePartial{};
  out->i = to_bits(row_extreme_value<T, kMax>(static_cast<const T*>(xv), n));
}

// The extreme value first (vectorised), then its first position.
template <class T, bool kMax>
void row_arg_extreme(const void* xv, int64_t n, int64_t index0, const ReduceParams&, ReducePartial* out) {
  const T* x = static_cast<const T*>(xv);
  const T best = row_extreme_value<T, kMax>(x, n);
  int64_t found = 0;
  while (x[found] != best) ++found;
  *out = ReducePartial{};
  out->i = to_bits(best);
  out->index = index0 + found;
}

template <class T>
void column_sum(const void* const* rows_v, int64_t nrows, int64_t w, int64_t, const ReduceParams&,
                ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  uint64_t acc[2 * kColumnBlockWidth] = {};
  for (int64_t r = 0; r < nrows; ++r) {
    const T* row = rows[r];
    for (int64_t j = 0; j < w; ++j) acc[j] += static_cast<uint64_t>(static_cast<Wide<T>>(row[j]));
  }
  for (int64_t j = 0; j < w; ++j) {
    out[j] = ReducePartial{};
    out[j].i = static_cast<int64_t>(acc[j]);
  }
}

template <class T>
void column_prod(const void* const* rows_v, int64_t nrows, int64_t w, int64_t, const ReduceParams&,
                 ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  uint64_t acc[2 * kColumnBlockWidth];
  for (int64_t j = 0; j < w; ++j) acc[j] = 1;
  for (int64_t r = 0; r < nrows; ++r) {
    const T* row = rows[r];
    for (int64_t j = 0; j < w; ++j) acc[j] *= static_cast<uint64_t>(static_cast<Wide<T>>(row[j]));
  }
  for (int64_t j = 0; j < w; ++j) {
    out[j] = ReducePartial{};
    out[j].i = static_cast<int64_t>(acc[j]);
  }
}

template <class T, bool kMax>
void column_extreme(const void* const* rows_v, int64_t nrows, int64_t w, int64_t, const ReduceParams&,
                    ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  T best[2 * kColumnBlockWidth];
  for (int64_t j = 0; j < w; ++j) best[j] = rows[0][j];
  for (int64_t r = 1; r < nrows; ++r) {
    const T* row = rows[r];
    for (int64_t j = 0; j < w; ++j) best[j] = (kMax ? row[j] > best[j] : row[j] < best[j]) ? row[j] : best[j];
  }
  for (int64_t j = 0; j < w; ++j) {
    out[j] = ReducePartial{};
    out[j].i = to_bits(best[j]);
  }
}

// A row replaces the best only when strictly better: the first index among ties stays.
template <class T, bool kMax>
void column_arg_extreme(const void* const* rows_v, int64_t nrows, int64_t w, int64_t index0, const ReduceParams&,
                        ReducePartial* out) {
  const T* const* rows = reinterpret_cast<const T* const*>(rows_v);
  T best[2 * kColumnBlockWidth];
  int64_t where[2 * kColumnBlockWidth] = {};
  for (int64_t j = 0; j < w; ++j) best[j] = rows[0][j];
  for (int64_t r = 1; r < nrows; ++r) {
    const T* row = rows[r];
    for (int64_t j = 0; j < w; ++j) {
      const bool take = kMax ? row[j] > best[j] : row[j] < best[j];
      best[j] = take ? row[j] : best[j];
      where[j] = take ? r : where[j];
    }
  }
  for (int64_t j = 0; j < w; ++j) {
    out[j] = ReducePartial{};
    out[j].i = to_bits(best[j]);
    out[j].index = index0 + where[j];
  }
}

void combine_int_sum(ReducePartial* acc, const ReducePartial& next) {
  acc->i = static_cast<int64_t>(static_cast<uint64_t>(acc->i) + static_cast<uint64_t>(next.i));
}
void combine_int_prod(ReducePartial* acc, const ReducePartial& next) {
  acc->i = static_cast<int64_t>(static_cast<uint64_t>(acc->i) * static_cast<uint64_t>(next.i));
}
template <class T, bool kMax>
void combine_int_extreme(ReducePartial* acc, const ReducePartial& next) {
  const bool take = kMax ? from_bits<T>(next.i) > from_bits<T>(acc->i) : from_bits<T>(next.i) < from_bits<T>(acc->i);
  if (take) *acc = next;
}

template <class T>
ReduceKernel int_kernel(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum:
      return {&row_sum<T>, &column_sum<T>, &combine_int_sum};
    case ReduceKind::Prod:
      return {&row_prod<T>, &column_prod<T>, &combine_int_prod};
    case ReduceKind::Max:
      return {&row_extreme<T, true>, &column_extreme<T, true>, &combine_int_extreme<T, true>};
    case ReduceKind::Min:
      return {&row_extreme<T, false>, &column_extreme<T, false>, &combine_int_extreme<T, false>};
    case ReduceKind::ArgMax:
      return {&row_arg_extreme<T, true>, &column_arg_extreme<T, true>, &combine_int_extreme<T, true>};
    case ReduceKind::ArgMin:
      return {&row_arg_extreme<T, false>, &column_arg_extreme<T, false>, &combine_int_extreme<T, false>};
    default:
      fail(ErrorKind::NotImplemented, reduce_kind_name(kind), "not implemented for integer and bool inputs");
  }
}

}  // namespace

ReduceKernel reduce_int_kernel(ReduceKind kind, DType dtype) {
  switch (dtype) {
    case DType::Bool:  // stored as one byte holding 0 or 1
    case DType::UInt8: return int_kernel<uint8_t>(kind);
    case DType::UInt16: return int_kernel<uint16_t>(kind);
    case DType::UInt32: return int_kernel<uint32_t>(kind);
    case DType::UInt64: return int_kernel<uint64_t>(kind);
    case DType::Int8: return int_kernel<int8_t>(kind);
    case DType::Int16: return int_kernel<int16_t>(kind);
    case DType::Int32: return int_kernel<int32_t>(kind);
    case DType::Int64: return int_kernel<int64_t>(kind);
    default:
      fail(ErrorKind::NotImplemented, "reduce", "{} is not an integer dtype", dtype_name(dtype));
  }
}

}  // namespace kiln::cpu
