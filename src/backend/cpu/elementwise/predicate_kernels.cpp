// Kernels that write bool (comparisons, logical ops, isnan/isinf/isfinite) and where(),
// for every compute dtype: plain loops the compiler vectorises. They are memory bound
// (one byte out per element), so hand-written SIMD would buy nothing.
//
// Comparisons see both operands in one (promoted) dtype, so unsigned values compare as
// unsigned (uint64 2^63 > 1) and there is no signed/unsigned mixing here. Complex
// values support only eq/ne, as in PyTorch. Bool is stored as one byte, 0 or 1.
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cpu/elementwise/elementwise_kernels.h"
#include "backend/cpu/common/map_loops.h"

namespace kiln::cpu {
namespace {

template <typename T>
bool nonzero(T x) {
  return x != T(0);
}

template <typename T>
struct Predicates {
  static constexpr bool kOrdered = !std::is_same_v<T, std::complex<float>> && !std::is_same_v<T, std::complex<double>>;

#define KILN_PREDICATE2(name, expr)                                                            \
  static void name(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {    \
    map_binary<uint8_t, T>(out, a, b, n, [](T x, T y) -> uint8_t { return expr; });                    \
  }
  KILN_PREDICATE2(eq, x == y)
  KILN_PREDICATE2(ne, x != y)
  KILN_PREDICATE2(logical_and, nonzero(x) && nonzero(y))
  KILN_PREDICATE2(logical_or, nonzero(x) || nonzero(y))
  KILN_PREDICATE2(logical_xor, nonzero(x) != nonzero(y))
#undef KILN_PREDICATE2

  static void logical_not(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<uint8_t, T>(out, in, n, [](T x) -> uint8_t { return !nonzero(x); });
  }

  static BinaryKernel binary(BinaryOp op);
  static UnaryKernel unary(UnaryOp op);
};

// Ordered comparisons (real dtypes only).
template <typename T>
struct Ordered {
#define KILN_PREDICATE2(name, expr)                                                            \
  static void name(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {    \
    map_binary<uint8_t, T>(out, a, b, n, [](T x, T y) -> uint8_t { return expr; });                    \
  }
  KILN_PREDICATE2(lt, x < y)
  KILN_PREDICATE2(le, x <= y)
  KILN_PREDICATE2(gt, x > y)
  KILN_PREDICATE2(ge, x >= y)
#undef KILN_PREDICATE2
};

// isnan/isinf/isfinite: integers and bool are always finite; a complex value is NaN
// (inf) when either part is, and finite when both are.
template <typename T>
struct Classify {
  static void isnan(char* out, const char* in, int64_t n, const KernelArgs&) {
    if constexpr (std::is_floating_point_v<T>) {
      map_unary<uint8_t, T>(out, in, n, [](T x) -> uint8_t { return x != x; });
    } else if constexpr (std::is_integral_v<T>) {
      std::memset(out, 0, static_cast<size_t>(n));
    } else {
      map_unary<uint8_t, T>(out, in, n, [](T z) -> uint8_t { return std::isnan(z.real()) || std::isnan(z.imag()); });
    }
  }
  static void isinf(char* out, const char* in, int64_t n, const KernelArgs&) {
    if constexpr (std::is_floating_point_v<T>) {
      map_unary<uint8_t, T>(out, in, n, [](T x) -> uint8_t { return std::isinf(x); });
    } else if constexpr (std::is_integral_v<T>) {
      std::memset(out, 0, static_cast<size_t>(n));
    } else {
      map_unary<uint8_t, T>(out, in, n, [](T z) -> uint8_t { return std::isinf(z.real()) || std::isinf(z.imag()); });
    }
  }
  static void isfinite(char* out, const char* in, int64_t n, const KernelArgs&) {
    if constexpr (std::is_floating_point_v<T>) {
      map_unary<uint8_t, T>(out, in, n, [](T x) -> uint8_t { return std::isfinite(x); });
    } else if constexpr (std::is_integral_v<T>) {
      std::memset(out, 1, static_cast<size_t>(n));
    } else {
      map_unary<uint8_t, T>(out, in, n,
                    [](T z) -> uint8_t { return std::isfinite(z.real()) && std::isfinite(z.imag()); });
    }
  }
};

template <typename T>
BinaryKernel Predicates<T>::binary(BinaryOp op) {
  switch (op) {
    case BinaryOp::Eq: return eq;
    case BinaryOp::Ne: return ne;
    case BinaryOp::LogicalAnd: return logical_and;
    case BinaryOp::LogicalOr: return logical_or;
    case BinaryOp::LogicalXor: return logical_xor;
    default: break;
  }
  if constexpr (kOrdered) {
    switch (op) {
      case BinaryOp::Lt: return Ordered<T>::lt;
      case BinaryOp::Le: return Ordered<T>::le;
      case BinaryOp::Gt: return Ordered<T>::gt;
      case BinaryOp::Ge: return Ordered<T>::ge;
      default: break;
    }
  }
  return nullptr;
}

template <typename T>
UnaryKernel Predicates<T>::unary(UnaryOp op) {
  switch (op) {
    case UnaryOp::LogicalNot: return logical_not;
    case UnaryOp::IsNan: return Classify<T>::isnan;
    case UnaryOp::IsInf: return Classify<T>::isinf;
    case UnaryOp::IsFinite: return Classify<T>::isfinite;
    default: return nullptr;
  }
}

// fn(T{}) for the C++ type of a compute dtype (bool as its 0/1 byte).
template <typename R, typename Fn>
R for_compute_dtype(DType t, Fn fn) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8: return fn(uint8_t{});
    case DType::UInt16: return fn(uint16_t{});
    case DType::UInt32: return fn(uint32_t{});
    case DType::UInt64: return fn(uint64_t{});
    case DType::Int8: return fn(int8_t{});
    case DType::Int16: return fn(int16_t{});
    case DType::Int32: return fn(int32_t{});
    case DType::Int64: return fn(int64_t{});
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Complex64: return fn(std::complex<float>{});
    case DType::Complex128: return fn(std::complex<double>{});
    default: return nullptr;  // f16/bf16/fp8 are never compute dtypes
  }
}

// where() moves bytes, so one kernel per element size serves every dtype.
template <size_t kSize>
struct Bytes {
  unsigned char b[kSize];
};

template <typename T>
void select_kernel(char* out, const char* cond, const char* a, const char* b, int64_t n, const KernelArgs&) {
  T* o = reinterpret_cast<T*>(out);
  const uint8_t* c = reinterpret_cast<const uint8_t*>(cond);
  const T* x = reinterpret_cast<const T*>(a);
  const T* y = reinterpret_cast<const T*>(b);
  // Both values are read unconditionally so that the compiler can blend instead of
  // branching on the (often random) condition.
  for (int64_t i = 0; i < n; ++i) {
    const T a_value = x[i], b_value = y[i];
    o[i] = c[i] != 0 ? a_value : b_value;
  }
}

}  // namespace

BinaryKernel predicate_binary_kernel(BinaryOp op, DType compute) {
  return for_compute_dtype<BinaryKernel>(compute, [op](auto v) { return Predicates<decltype(v)>::binary(op); });
}

UnaryKernel predicate_unary_kernel(UnaryOp op, DType compute) {
  return for_compute_dtype<UnaryKernel>(compute, [op](auto v) { return Predicates<decltype(v)>::unary(op); });
}

TernaryKernel where_kernel(DType dtype) {
  switch (itemsize(dtype)) {
    case 1: return select_kernel<uint8_t>;
    case 2: return select_kernel<uint16_t>;
    case 4: return select_kernel<uint32_t>;
    case 8: return select_kernel<uint64_t>;
    case 16: return select_kernel<Bytes<16>>;
    default: return nullptr;
  }
}

}  // namespace kiln::cpu
