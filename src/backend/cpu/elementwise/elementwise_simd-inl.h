// Highway loop skeletons for the float32/float64 elementwise kernels (internal; included
// once per target by the *_kernels.cpp files that define HWY_TARGET_INCLUDE).
//
// An op is a small functor template over the vector tag D: constructed once per kernel
// call from (D, KernelArgs) so it can splat its constants, then applied to whole
// vectors. The tail of an array goes through a zero-padded full vector in a stack
// buffer, so every element sees exactly the same arithmetic as the body.

// Per-target include guard (Highway's pattern: the toggle flips once per target).
#if defined(KILN_BACKEND_CPU_ELEMENTWISE_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_BACKEND_CPU_ELEMENTWISE_SIMD_INL_H_
#undef KILN_BACKEND_CPU_ELEMENTWISE_SIMD_INL_H_
#else
#define KILN_BACKEND_CPU_ELEMENTWISE_SIMD_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/elementwise/elementwise_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out[i] = Op(in[i]). out may equal in (in-place ops).
template <typename T, template <class> class Op>
void UnaryLoop(char* out_bytes, const char* in_bytes, int64_t n, const KernelArgs& args) {
  const hn::ScalableTag<T> d;
  const Op<decltype(d)> op(d, args);
  T* out = reinterpret_cast<T*>(out_bytes);
  const T* in = reinterpret_cast<const T*>(in_bytes);
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(op(hn::LoadU(d, in + i)), d, out + i);
  if (i < n) {
    const size_t rest = static_cast<size_t>(n - i) * sizeof(T);
    HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)] = {};
    std::memcpy(buf, in + i, rest);
    hn::Store(op(hn::Load(d, buf)), d, buf);
    std::memcpy(out + i, buf, rest);
  }
}

// out[i] = Op(a[i], b[i]).
template <typename T, template <class> class Op>
void BinaryLoop(char* out_bytes, const char* a_bytes, const char* b_bytes, int64_t n, const KernelArgs& args) {
  const hn::ScalableTag<T> d;
  const Op<decltype(d)> op(d, args);
  T* out = reinterpret_cast<T*>(out_bytes);
  const T* a = reinterpret_cast<const T*>(a_bytes);
  const T* b = reinterpret_cast<const T*>(b_bytes);
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(op(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  if (i < n) {
    const size_t rest = static_cast<size_t>(n - i) * sizeof(T);
    HWY_ALIGN T buf_a[HWY_MAX_BYTES / sizeof(T)] = {};
    HWY_ALIGN T buf_b[HWY_MAX_BYTES / sizeof(T)] = {};
    std::memcpy(buf_a, a + i, rest);
    std::memcpy(buf_b, b + i, rest);
    hn::Store(op(hn::Load(d, buf_a), hn::Load(d, buf_b)), d, buf_a);
    std::memcpy(out + i, buf_a, rest);
  }
}

// out[i] = Op(a[i], b[i], c[i]).
template <typename T, template <class> class Op>
void TernaryLoop(char* out_bytes, const char* a_bytes, const char* b_bytes, const char* c_bytes, int64_t n,
                 const KernelArgs& args) {
  const hn::ScalableTag<T> d;
  const Op<decltype(d)> op(d, args);
  T* out = reinterpret_cast<T*>(out_bytes);
  const T* a = reinterpret_cast<const T*>(a_bytes);
  const T* b = reinterpret_cast<const T*>(b_bytes);
  const T* c = reinterpret_cast<const T*>(c_bytes);
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(op(hn::LoadU(d, a + i), hn::LoadU(d, b + i), hn::LoadU(d, c + i)), d, out + i);
  }
  if (i < n) {
    const size_t rest = static_cast<size_t>(n - i) * sizeof(T);
    HWY_ALIGN T buf_a[HWY_MAX_BYTES / sizeof(T)] = {};
    HWY_ALIGN T buf_b[HWY_MAX_BYTES / sizeof(T)] = {};
    HWY_ALIGN T buf_c[HWY_MAX_BYTES / sizeof(T)] = {};
    std::memcpy(buf_a, a + i, rest);
    std::memcpy(buf_b, b + i, rest);
    std::memcpy(buf_c, c + i, rest);
    hn::Store(op(hn::Load(d, buf_a), hn::Load(d, buf_b), hn::Load(d, buf_c)), d, buf_a);
    std::memcpy(out + i, buf_a, rest);
  }
}

template <class D>
HWY_INLINE hn::Vec<D> One(D d) {
  return hn::Set(d, hn::TFromD<D>(1));
}

// Nearest integer, ties to even, alike on every target: adding and subtracting
// 2^mantissa_bits rounds |x| to an integer in the (nearest-even) rounding mode. Values
// at or above 2^mantissa_bits, infinities and NaN are already "integers" and pass
// through. (Highway 1.0.3's emulated Round mis-rounds 0.49999997f to 1 and its Ceil
// turns +0.0 into -0.0, so kiln builds its roundings on this one primitive.)
template <class D, class V>
HWY_INLINE V RoundHalfEven(D d, V x) {
  using T = hn::TFromD<D>;
  const V big = hn::Set(d, sizeof(T) == 4 ? T(8388608.0) : T(4503599627370496.0));
  const V ax = hn::Abs(x);
  const V rounded = hn::CopySign(hn::Sub(hn::Add(ax, big), big), x);
  return hn::IfThenElse(hn::Lt(ax, big), rounded, x);
}

// floor/ceil/trunc step from the nearest integer; the result always has x's sign
// (floor(-0.0) = -0.0, ceil(-0.5) = -0.0), which CopySign restores.
template <class D, class V>
HWY_INLINE V FloorOf(D d, V x) {
  const V r = RoundHalfEven(d, x);
  return hn::CopySign(hn::IfThenElse(hn::Gt(r, x), hn::Sub(r, One(d)), r), x);
}
template <class D, class V>
HWY_INLINE V CeilOf(D d, V x) {
  const V r = RoundHalfEven(d, x);
  return hn::CopySign(hn::IfThenElse(hn::Lt(r, x), hn::Add(r, One(d)), r), x);
}
template <class D, class V>
HWY_INLINE V TruncOf(D d, V x) {
  const V r = RoundHalfEven(d, x);
  const V toward_zero = hn::Sub(r, hn::CopySign(One(d), x));
  return hn::CopySign(hn::IfThenElse(hn::Gt(hn::Abs(r), hn::Abs(x)), toward_zero, r), x);
}

// The kernel for the compute dtype (float32, or float64 when f64).
template <template <class> class Op>
UnaryKernel PickUnary(bool f64) {
  return f64 ? &UnaryLoop<double, Op> : &UnaryLoop<float, Op>;
}
template <template <class> class Op>
BinaryKernel PickBinary(bool f64) {
  return f64 ? &BinaryLoop<double, Op> : &BinaryLoop<float, Op>;
}
template <template <class> class Op>
TernaryKernel PickTernary(bool f64) {
  return f64 ? &TernaryLoop<double, Op> : &TernaryLoop<float, Op>;
}

}  // namespace kiln::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
