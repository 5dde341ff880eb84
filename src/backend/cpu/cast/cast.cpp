// cast_strided: one typed loop per (source, destination) dtype pair, picked from a
// 17x17 table built at compile time, so no element ever goes through a switch.
#include "backend/cpu/cast/cast.h"

#include <kiln/scalar_types.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace kiln::cpu {
namespace {

// How each dtype is stored and what value arithmetic sees: bool is a 0/1 byte (any
// nonzero byte reads as true), the narrow floats compute as float.
template <typename S>
struct PlainTraits {
  using Storage = S;
  using Compute = S;
  static S load(S s) { return s; }
  static S store(S c) { return c; }
};
template <typename S>
struct NarrowFloatTraits {
  using Storage = S;
  using Compute = float;
  static float load(S s) { return static_cast<float>(s); }
  static S store(float c) { return S(c); }
};
struct BoolTraits {
  using Storage = uint8_t;
  using Compute = bool;
  static bool load(uint8_t s) { return s != 0; }
  static uint8_t store(bool c) { return c ? 1 : 0; }
};

template <DType T>
struct Traits;
template <>
struct Traits<DType::Bool> : BoolTraits {};
template <>
struct Traits<DType::UInt8> : PlainTraits<uint8_t> {};
template <>
struct Traits<DType::UInt16> : PlainTraits<uint16_t> {};
template <>
struct Traits<DType::UInt32> : PlainTraits<uint32_t> {};
template <>
struct Traits<DType::UInt64> : PlainTraits<uint64_t> {};
template <>
struct Traits<DType::Int8> : PlainTraits<int8_t> {};
template <>
struct Traits<DType::Int16> : PlainTraits<int16_t> {};
template <>
struct Traits<DType::Int32> : PlainTraits<int32_t> {};
template <>
struct Traits<DType::Int64> : PlainTraits<int64_t> {};
template <>
struct Traits<DType::Float16> : NarrowFloatTraits<Half> {};
template <>
struct Traits<DType::BFloat16> : NarrowFloatTraits<BFloat16> {};
template <>
struct Traits<DType::Float32> : PlainTraits<float> {};
template <>
struct Traits<DType::Float64> : PlainTraits<double> {};
template <>
struct Traits<DType::Complex64> : PlainTraits<std::complex<float>> {};
template <>
struct Traits<DType::Complex128> : PlainTraits<std::complex<double>> {};
template <>
struct Traits<DType::Float8_e4m3fn> : NarrowFloatTraits<Float8_e4m3fn> {};
template <>
struct Traits<DType::Float8_e5m2> : NarrowFloatTraits<Float8_e5m2> {};

template <typename T>
constexpr bool kIsComplex = false;
template <typename T>
constexpr bool kIsComplex<std::complex<T>> = true;

// float -> integer without undefined behaviour: NaN is 0, the value truncates toward
// zero and saturates to int64 (uint64: to [-2^63, 2^64 - 1]), then wraps into `To`.
template <typename To>
To float_to_int(double v) {
  if (std::isnan(v)) return 0;
  if constexpr (std::is_same_v<To, uint64_t>) {
    if (v >= 0x1p64) return std::numeric_limits<uint64_t>::max();
    if (v >= 0x1p63) return static_cast<uint64_t>(v);
  }
  int64_t i;
  if (v >= 0x1p63)
    i = std::numeric_limits<int64_t>::max();
  else if (v < -0x1p63)
    i = std::numeric_limits<int64_t>::min();
  else
    i = static_cast<int64_t>(v);
  return static_cast<To>(i);
}

// Converts between compute types (bool, the integers, float, double, complex).
template <typename To, typename From>
To convert_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (kIsComplex<From>)
      return v.real() != 0 || v.imag() != 0;
    else
      return v != 0;
  } else if constexpr (kIsComplex<To>) {
    using R = typename To::value_type;
    if constexpr (kIsComplex<From>)
      return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    else
      return To(convert_value<R>(v), R(0));
  } else if constexpr (kIsComplex<From>) {
    return convert_value<To>(v.real());
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // float -> double is exact, so one routine serves both.
    return float_to_int<To>(static_cast<double>(v));
  } else {
    // bool -> 0/1; integer -> integer wraps (C++20); integer -> float and
    // double -> float round to nearest; float -> double is exact.
    return static_cast<To>(v);
  }
}

template <DType T>
using storage_t = typename Traits<T>::Storage;

template <DType S, DType D>
storage_t<D> convert_element(storage_t<S> s) {
  if constexpr (S == D) {
    return s;
  } else {
    return Traits<D>::store(convert_value<typename Traits<D>::Compute>(Traits<S>::load(s)));
  }
}

template <typename T>
T load_at(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void store_at(char* p, const T& v) {
  std::memcpy(p, &v, sizeof(T));
}

constexpr bool has_simd_f32_path(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64 ||
         t == DType::Float8_e4m3fn || t == DType::Float8_e5m2;
}

// Contiguous conversion between two SIMD-capable dtypes: directly when one side is
// float32, otherwise through float32 in stack-sized blocks, which is the semantics
// anyway (narrow floats and float64 -> narrow convert through float32).
void simd_contiguous(DType src_type, const char* src, DType dst_type, char* dst, int64_t n) {
  if (src_type == DType::Float32) return from_f32(reinterpret_cast<const float*>(src), dst_type, dst, n);
  if (dst_type == DType::Float32) return to_f32(src_type, src, reinterpret_cast<float*>(dst), n);
  constexpr int64_t kBlock = 512;
  float block[kBlock];
  const int64_t src_size = static_cast<int64_t>(itemsize(src_type));
  const int64_t dst_size = static_cast<int64_t>(itemsize(dst_type));
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i);
    to_f32(src_type, src + i * src_size, block, m);
    from_f32(block, dst_type, dst + i * dst_size, m);
  }
}

template <DType S, DType D>
void cast_loop(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t n) {
  using SS = storage_t<S>;
  using DS = storage_t<D>;
  constexpr int64_t kSrcSize = sizeof(SS);
  constexpr int64_t kDstSize = sizeof(DS);
  const bool contiguous = src_stride == kSrcSize && dst_stride == kDstSize;
  if constexpr (S == D) {
    if (contiguous) {
      std::memmove(dst, src, static_cast<size_t>(n * kSrcSize));
      return;
    }
  } else if constexpr (has_simd_f32_path(S) && has_simd_f32_path(D)) {
    if (contiguous) return simd_contiguous(S, src, D, dst, n);
  }
  if (src_stride == 0) {
    const DS v = convert_element<S, D>(load_at<SS>(src));
    for (int64_t i = 0; i < n; ++i) store_at(dst + i * dst_stride, v);
  } else if (contiguous) {
    // Constant strides let the compiler vectorise the common contiguous case.
    for (int64_t i = 0; i < n; ++i)
      store_at(dst + i * kDstSize, convert_element<S, D>(load_at<SS>(src + i * kSrcSize)));
  } else {
    for (int64_t i = 0; i < n; ++i)
      store_at(dst + i * dst_stride, convert_element<S, D>(load_at<SS>(src + i * src_stride)));
  }
}

using CastFn = void (*)(const char*, int64_t, char*, int64_t, int64_t);

template <size_t... I>
constexpr std::array<CastFn, sizeof...(I)> make_cast_table(std::index_sequence<I...>) {
  return {&cast_loop<static_cast<DType>(I / kNumDTypes), static_cast<DType>(I % kNumDTypes)>...};
}

// Row: source dtype; column: destination dtype.
constexpr auto kCastTable = make_cast_table(std::make_index_sequence<kNumDTypes * kNumDTypes>{});

}  // namespace

void cast_strided(DType src_type, const void* src, int64_t src_stride_bytes, DType dst_type, void* dst,
                  int64_t dst_stride_bytes, int64_t n) {
  if (n <= 0) return;
  const size_t index = static_cast<size_t>(src_type) * kNumDTypes + static_cast<size_t>(dst_type);
  kCastTable[index](static_cast<const char*>(src), src_stride_bytes, static_cast<char*>(dst), dst_stride_bytes, n);
}

}  // namespace kiln::cpu
