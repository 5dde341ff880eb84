// Shared by the CPU linalg kernels: the dtype dispatch, scalar helpers that treat real
// and complex alike, and the batch loop over the pool.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu::linalg {

using c64 = std::complex<float>;
using c128 = std::complex<double>;

template <typename T>
struct RealOf {
  using type = T;
};
template <typename R>
struct RealOf<std::complex<R>> {
  using type = R;
};
template <typename T>
using Real = typename RealOf<T>::type;

template <typename T>
inline constexpr bool kIsComplex = !std::is_same_v<T, Real<T>>;

// fn(T{}) with T the C++ type of a linalg dtype (float32, float64, complex64, complex128).
template <typename F>
decltype(auto) dispatch(DType dtype, const char* op, F&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Complex64: return fn(c64{});
    case DType::Complex128: return fn(c128{});
    default: fail(ErrorKind::Type, op, "no linalg kernel for dtype {}", dtype_name(dtype));
  }
}

template <typename T>
inline T conj_of(T v) {
  if constexpr (kIsComplex<T>) return std::conj(v);
  else return v;
}

// |re| + |im| for complex (LAPACK's icamax pivot measure), |x| for real.
template <typename T>
inline Real<T> abs1(T v) {
  if constexpr (kIsComplex<T>) return std::abs(v.real()) + std::abs(v.imag());
  else return std::abs(v);
}

// Plain complex product: std::complex's operator* checks for NaN and calls a library
// routine per product, which the inner loops cannot afford; inf/NaN still propagate.
template <typename T>
inline T mul(T a, T b) {
  if constexpr (kIsComplex<T>) {
    return T(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
  } else {
    return a * b;
  }
}

template <typename T>
inline Real<T> real_part(T v) {
  if constexpr (kIsComplex<T>) return v.real();
  else return v;
}

// Whether no element is inf or NaN: an exponent field of all ones, tested on the bits.
// The exponent field plus its lowest bit carries into the sign bit exactly when it is
// all ones, so the test is an add and an OR reduced over the block, which vectorises
// even on the SSE2 baseline (a bool OR of compares did not: GCC kept it scalar, and
// lu_factor spent ~10% of a 256 x 256 complex64 call in it); one early exit per block.
template <typename T>
bool all_finite(const T* x, int64_t count) {
  using R = Real<T>;
  using Bits = std::conditional_t<sizeof(R) == 4, uint32_t, uint64_t>;
  constexpr Bits kExponent = static_cast<Bits>(sizeof(R) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  constexpr Bits kExponentLsb = kExponent & (~kExponent + 1);
  constexpr Bits kSign = static_cast<Bits>(Bits{1} << (sizeof(Bits) * 8 - 1));
  const int64_t n = count * (kIsComplex<T> ? 2 : 1);
  const auto* bytes = reinterpret_cast<const unsigned char*>(x);
  constexpr int64_t kBlock = 4096;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    Bits carry = 0;
    for (int64_t i = begin; i < end; ++i) {
      Bits b;
      std::memcpy(&b, bytes + i * sizeof(Bits), sizeof(Bits));
      carry |= (b & kExponent) + kExponentLsb;
    }
    if (carry & kSign) return false;
  }
  return true;
}

// Runs fn(b) for every matrix b < batch over the pool; `cost` is the work per matrix
// (flops, roughly) so small matrices are grouped into chunks worth a wake-up.
template <typename F>
void for_each_matrix(ThreadPool& pool, int64_t batch, double cost, F&& fn) {
  const double per_chunk = 2e5;
  const int64_t grain = cost >= per_chunk ? 1 : static_cast<int64_t>(per_chunk / (cost > 1 ? cost : 1));
  pool.parallel_for(batch, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) fn(b);
  });
}

}  // namespace kiln::cpu::linalg
