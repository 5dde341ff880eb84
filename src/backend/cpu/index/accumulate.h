// How the adding index kernels (scatter_add, index_add, index_put_ with accumulate) add
// one element into another, per dtype, and the one dtype switch they share.
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/addable_dtype.h"
#include "kiln/dtype.h"
#include "kiln/scalar.h"
#include "kiln/scalar_types.h"

namespace kiln::cpu {

// `Alpha` is the type alpha is converted to once per call.
template <typename T>
struct Accumulate {
  // f16 and bf16 add in float and round after every addition, like PyTorch's CPU kernel.
  using Alpha = std::conditional_t<std::is_same_v<T, double>, double, float>;
  static Alpha alpha(const Scalar& s) { return static_cast<Alpha>(s.to_double()); }
  static T add(T dst, T src, Alpha a) {
    return static_cast<T>(static_cast<Alpha>(dst) + a * static_cast<Alpha>(src));
  }
};

template <typename R>
struct Accumulate<std::complex<R>> {
  using Alpha = std::complex<R>;
  static Alpha alpha(const Scalar& s) { return static_cast<Alpha>(s.to_complex()); }
  static std::complex<R> add(std::complex<R> dst, std::complex<R> src, Alpha a) { return dst + a * src; }
};

// A bool element as its byte. Storage reinterpreted as bool (from_storage, numpy's
// view(bool)) may hold bytes other than 0 and 1; loading one as a C++ bool is undefined,
// so the byte is read and any nonzero one counts as true (what PyTorch's kernels do in
// practice); the result is written as 0 or 1.
struct BoolByte {
  uint8_t byte;
};

template <>
struct Accumulate<BoolByte> {
  using Alpha = bool;
  static Alpha alpha(const Scalar& s) { return s.to_bool(); }
  static BoolByte add(BoolByte dst, BoolByte src, Alpha a) {
    return {static_cast<uint8_t>(dst.byte != 0 || (a && src.byte != 0))};
  }
};

// Integers wrap modulo 2^bits like PyTorch's; computing in uint64 keeps that free of
// signed-overflow UB.
template <typename T>
  requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
struct Accumulate<T> {
  using Alpha = uint64_t;
  static Alpha alpha(const Scalar& s) {
    return s.tag() == Scalar::Tag::UInt ? s.to_uint64() : static_cast<uint64_t>(s.to_int64());
  }
  static uint64_t widen(T v) {
    if constexpr (std::is_signed_v<T>) return static_cast<uint64_t>(static_cast<int64_t>(v));
    else return static_cast<uint64_t>(v);
  }
  static T add(T dst, T src, Alpha a) { return static_cast<T>(widen(dst) + a * widen(src)); }
};

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls visit(TypeTag<T>{}) with the C++ type of an addable dtype and returns its result;
// returns `none` for fp8 (a storage format with no arithmetic here; callers refuse it
// first with check_addable_dtype).
template <typename R, typename Visit>
R visit_addable_dtype(DType dt, R none, Visit&& visit) {
  switch (dt) {
    case DType::Bool: return visit(TypeTag<BoolByte>{});
    case DType::UInt8: return visit(TypeTag<uint8_t>{});
    case DType::UInt16: return visit(TypeTag<uint16_t>{});
    case DType::UInt32: return visit(TypeTag<uint32_t>{});
    case DType::UInt64: return visit(TypeTag<uint64_t>{});
    case DType::Int8: return visit(TypeTag<int8_t>{});
    case DType::Int16: return visit(TypeTag<int16_t>{});
    case DType::Int32: return visit(TypeTag<int32_t>{});
    case DType::Int64: return visit(TypeTag<int64_t>{});
    case DType::Float16: return visit(TypeTag<Half>{});
    case DType::BFloat16: return visit(TypeTag<BFloat16>{});
    case DType::Float32: return visit(TypeTag<float>{});
    case DType::Float64: return visit(TypeTag<double>{});
    case DType::Complex64: return visit(TypeTag<std::complex<float>>{});
    case DType::Complex128: return visit(TypeTag<std::complex<double>>{});
    case DType::Float8_e4m3fn:
    case DType::Float8_e5m2: break;
  }
  return none;
}

}  // namespace kiln::cpu
