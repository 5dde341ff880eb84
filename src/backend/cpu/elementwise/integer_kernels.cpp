// Bool and integer elementwise kernels: plain loops the compiler vectorises where the
// hardware can (there is no SIMD integer division on x86, so those stay scalar).
//
// Arithmetic wraps modulo 2^bits as in PyTorch, and is done in unsigned types so
// that no overflow is undefined behaviour: int8 * int8 in C++ would promote to int,
// int32 * int32 could overflow. Bool is stored as one byte, 0 or 1.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/elementwise/elementwise_kernels.h"
#include "kiln/error.h"
#include "backend/cpu/common/map_loops.h"

namespace kiln::cpu {
namespace {

// Unsigned arithmetic at least as wide as T and never promoted to int.
template <typename T>
using Wide = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

template <typename T>
T wrap(Wide<T> v) {
  return static_cast<T>(v);
}

// x < 0 without a "comparison is always false" warning for unsigned T.
template <typename T>
constexpr bool negative(T x) {
  if constexpr (std::is_signed_v<T>) {
    return x < 0;
  } else {
    return false;
  }
}

// ---------------------------------------------------------------- integers

template <typename T>
struct Int {
  static constexpr bool kSigned = std::is_signed_v<T>;
  using W = Wide<T>;

  static void abs(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<T>(out, in, n, [](T x) { return negative(x) ? wrap<T>(W(0) - W(x)) : x; });
  }
  static void neg(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<T>(out, in, n, [](T x) { return wrap<T>(W(0) - W(x)); });
  }
  static void sign(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<T>(out, in, n, [](T x) { return static_cast<T>((T(0) < x) - negative(x)); });
  }
  static void square(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<T>(out, in, n, [](T x) { return wrap<T>(W(x) * W(x)); });
  }
  static void cube(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<T>(out, in, n, [](T x) { return wrap<T>(W(x) * W(x) * W(x)); });
  }
  static void bitwise_not(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<T>(out, in, n, [](T x) { return static_cast<T>(~x); });
  }
  static void relu(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<T>(out, in, n, [](T x) { return std::max(x, T(0)); });
  }
  // floor/ceil/round/trunc of an integer is the integer.
  static void copy(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<T>(out, in, n, [](T x) { return x; });
  }

  static void add(char* out, const char* a, const char* b, int64_t n, const KernelArgs& args) {
    const W alpha = static_cast<W>(args.alpha.i);
    map_binary<T>(out, a, b, n, [alpha](T x, T y) { return wrap<T>(W(x) + alpha * W(y)); });
  }
  static void mul(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) { return wrap<T>(W(x) * W(y)); });
  }

  [[noreturn]] static void zero_division(const char* op) { fail(ErrorKind::Runtime, op, "ZeroDivisionError"); }

  // x / y rounded toward zero; y = -1 is a wrapping negation (INT_MIN / -1 traps on x86).
  static T quotient(T x, T y) {
    if (kSigned && y == T(-1)) return wrap<T>(W(0) - W(x));
    return static_cast<T>(x / y);
  }
  static void div_trunc(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) {
      if (y == 0) zero_division("div");
      return quotient(x, y);
    });
  }
  // Rounds toward -inf: one less than the truncated quotient when the signs differ and
  // the division is inexact (PyTorch's div_floor_integer).
  static void div_floor(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) {
      if (y == 0) zero_division("div");
      const T q = quotient(x, y);
      if (negative(x) != negative(y) && wrap<T>(W(x) - W(q) * W(y)) != 0) return static_cast<T>(q - 1);
      return q;
    });
  }
  // Python's modulo: the result has the sign of y.
  static void remainder(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) {
      if (y == 0) zero_division("remainder");
      if (kSigned && y == T(-1)) return T(0);
      T r = static_cast<T>(x % y);
      if (r != 0 && negative(r) != negative(y)) r = static_cast<T>(r + y);
      return r;
    });
  }
  // Repeated squaring, wrapping. A negative exponent gives 1/x^|y| truncated, as
  // PyTorch's powi: 1 for x = 1, +-1 for x = -1, else 0.
  static T power(T x, T y) {
    if (negative(y)) {
      if (x == 1) return 1;
      if (x == T(-1)) return (y & 1) ? T(-1) : T(1);
      return 0;
    }
    W result = 1, base = W(x);
    for (auto e = static_cast<std::make_unsigned_t<T>>(y); e != 0; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return wrap<T>(result);
  }
  static void pow(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, power);
  }
  static void maximum(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) { return std::max(x, y); });
  }
  static void minimum(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) { return std::min(x, y); });
  }
  static void bit_and(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) { return static_cast<T>(x & y); });
  }
  static void bit_or(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) { return static_cast<T>(x | y); });
  }
  static void bit_xor(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) { return static_cast<T>(x ^ y); });
  }
  // Shifts by a negative amount or by >= the bit width give 0 (left) or the sign fill
  // (right), as PyTorch's lshift/rshift kernels.
  static void shift_left(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) {
      constexpr T kBits = T(sizeof(T) * 8);
      if (negative(y) || y >= kBits) return T(0);
      return wrap<T>(W(x) << y);
    });
  }
  static void shift_right(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<T>(out, a, b, n, [](T x, T y) {
      constexpr T kMax = T(sizeof(T) * 8 - (kSigned ? 1 : 0));
      if (negative(y) || y >= kMax) {
        if constexpr (kSigned) {
          return static_cast<T>(x >> kMax);
        } else {
          return T(0);
        }
      }
      return static_cast<T>(x >> y);
    });
  }
  static void clamp(char* out, const char* a, const char* b, const char* c, int64_t n, const KernelArgs&) {
    T* o = reinterpret_cast<T*>(out);
    const T* x = reinterpret_cast<const T*>(a);
    const T* lo = reinterpret_cast<const T*>(b);
    const T* hi = reinterpret_cast<const T*>(c);
    for (int64_t i = 0; i < n; ++i) o[i] = std::min(std::max(x[i], lo[i]), hi[i]);
  }

  static UnaryKernel unary(UnaryOp op) {
    switch (op) {
      case UnaryOp::Abs: return abs;
      case UnaryOp::Neg: return neg;
      case UnaryOp::Sign: return sign;
      case UnaryOp::Square: return square;
      case UnaryOp::Cube: return cube;
      case UnaryOp::BitwiseNot: return bitwise_not;
      case UnaryOp::Relu: return relu;
      case UnaryOp::Floor:
      case UnaryOp::Ceil:
      case UnaryOp::Round:
      case UnaryOp::Trunc: return copy;
      default: return nullptr;
    }
  }
  static BinaryKernel binary(BinaryOp op) {
    switch (op) {
      case BinaryOp::Add: return add;
      case BinaryOp::Mul: return mul;
      case BinaryOp::DivTrunc: return div_trunc;
      case BinaryOp::DivFloor: return div_floor;
      case BinaryOp::Remainder: return remainder;
      case BinaryOp::Pow: return pow;
      case BinaryOp::Maximum: return maximum;
      case BinaryOp::Minimum: return minimum;
      case BinaryOp::BitwiseAnd: return bit_and;
      case BinaryOp::BitwiseOr: return bit_or;
      case BinaryOp::BitwiseXor: return bit_xor;
      case BinaryOp::LeftShift: return shift_left;
      case BinaryOp::RightShift: return shift_right;
      default: return nullptr;
    }
  }
};

// ---------------------------------------------------------------- bool
// Arithmetic on bool is logic: add is or (with alpha), mul/minimum are and, maximum is or.

struct Bool {
  static void add(char* out, const char* a, const char* b, int64_t n, const KernelArgs& args) {
    const uint8_t alpha = args.alpha.i != 0;
    map_binary<uint8_t>(out, a, b, n, [alpha](uint8_t x, uint8_t y) { return uint8_t(x | (y & alpha)); });
  }
  static void both(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<uint8_t>(out, a, b, n, [](uint8_t x, uint8_t y) { return uint8_t(x & y); });
  }
  static void either(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<uint8_t>(out, a, b, n, [](uint8_t x, uint8_t y) { return uint8_t(x | y); });
  }
  static void exclusive(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<uint8_t>(out, a, b, n, [](uint8_t x, uint8_t y) { return uint8_t(x ^ y); });
  }
  static void invert(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<uint8_t>(out, in, n, [](uint8_t x) { return uint8_t(x ^ 1); });
  }
  static void same(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<uint8_t>(out, in, n, [](uint8_t x) { return x; });
  }

  static UnaryKernel unary(UnaryOp op) {
    switch (op) {
      case UnaryOp::BitwiseNot: return invert;
      case UnaryOp::Sign: return same;
      default: return nullptr;
    }
  }
  static BinaryKernel binary(BinaryOp op) {
    switch (op) {
      case BinaryOp::Add: return add;
      case BinaryOp::Mul:
      case BinaryOp::Minimum:
      case BinaryOp::BitwiseAnd: return both;
      case BinaryOp::Maximum:
      case BinaryOp::BitwiseOr: return either;
      case BinaryOp::BitwiseXor: return exclusive;
      default: return nullptr;
    }
  }
};

// fn(Int<T>{}) for an integer compute dtype, `none` for any other.
template <typename R, typename Fn>
R for_integer(DType t, Fn fn, R none) {
  switch (t) {
    case DType::UInt8: return fn(Int<uint8_t>{});
    case DType::UInt16: return fn(Int<uint16_t>{});
    case DType::UInt32: return fn(Int<uint32_t>{});
    case DType::UInt64: return fn(Int<uint64_t>{});
    case DType::Int8: return fn(Int<int8_t>{});
    case DType::Int16: return fn(Int<int16_t>{});
    case DType::Int32: return fn(Int<int32_t>{});
    case DType::Int64: return fn(Int<int64_t>{});
    default: return none;
  }
}

}  // namespace

UnaryKernel integer_unary_kernel(UnaryOp op, DType compute) {
  if (compute == DType::Bool) return Bool::unary(op);
  return for_integer<UnaryKernel>(compute, [op](auto impl) { return decltype(impl)::unary(op); }, nullptr);
}

BinaryKernel integer_binary_kernel(BinaryOp op, DType compute) {
  if (compute == DType::Bool) return Bool::binary(op);
  return for_integer<BinaryKernel>(compute, [op](auto impl) { return decltype(impl)::binary(op); }, nullptr);
}

TernaryKernel integer_ternary_kernel(TernaryOp op, DType compute) {
  if (op != TernaryOp::Clamp) return nullptr;
  return for_integer<TernaryKernel>(compute, [](auto impl) -> TernaryKernel { return decltype(impl)::clamp; },
                                    nullptr);
}

}  // namespace kiln::cpu
