// complex64/complex128 elementwise kernels: plain loops.
//
// Multiplication and division follow c10::complex (PyTorch's own complex type), not
// std::complex: the product is the textbook formula (which the compiler vectorises;
// libstdc++'s Annex G version calls a function per element), and the quotient is
// NumPy's scaled (Smith-style) algorithm, which avoids overflow in c^2 + d^2.
// Transcendentals (exp, log, sqrt, pow) are the C library's, as PyTorch's CPU kernels.
#include <complex>
#include <cstdint>

#include "backend/cpu/elementwise/elementwise_kernels.h"
#include "backend/cpu/common/map_loops.h"

namespace kiln::cpu {
namespace {

template <typename R>
struct Complex {
  using C = std::complex<R>;

  static C mul(C x, C y) {
    return C(x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real());
  }
  // c10::complex's operator/ (NumPy's algorithm): scale by the larger of |c|, |d|.
  static C div(C x, C y) {
    const R a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
    const R abs_c = std::abs(c), abs_d = std::abs(d);
    if (abs_c >= abs_d) {
      if (abs_c == R(0) && abs_d == R(0)) return C(a / abs_c, b / abs_d);  // complex inf or NaN
      const R rat = d / c;
      const R scl = R(1) / (c + d * rat);
      return C((a + b * rat) * scl, (b - a * rat) * scl);
    }
    const R rat = c / d;
    const R scl = R(1) / (d + c * rat);
    return C((a * rat + b) * scl, (b * rat - a) * scl);
  }

  // |z| = hypot(re, im): the real dtype out.
  static void abs(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<R, C>(out, in, n, [](C z) { return std::abs(z); });
  }
  static void neg(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<C, C>(out, in, n, [](C z) { return -z; });
  }
  static void square(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<C, C>(out, in, n, [](C z) { return mul(z, z); });
  }
  static void reciprocal(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<C, C>(out, in, n, [](C z) { return div(C(1), z); });
  }
  static void sqrt(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<C, C>(out, in, n, [](C z) { return std::sqrt(z); });
  }
  static void exp(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<C, C>(out, in, n, [](C z) { return std::exp(z); });
  }
  static void log(char* out, const char* in, int64_t n, const KernelArgs&) {
    map_unary<C, C>(out, in, n, [](C z) { return std::log(z); });
  }

  static void add(char* out, const char* a, const char* b, int64_t n, const KernelArgs& args) {
    const C alpha(static_cast<R>(args.alpha.c.real()), static_cast<R>(args.alpha.c.imag()));
    if (alpha == C(1)) {
      map_binary<C>(out, a, b, n, [](C x, C y) { return x + y; });
    } else {
      map_binary<C>(out, a, b, n, [alpha](C x, C y) { return x + mul(alpha, y); });
    }
  }
  static void multiply(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<C>(out, a, b, n, mul);
  }
  static void divide(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<C>(out, a, b, n, div);
  }
  static void pow(char* out, const char* a, const char* b, int64_t n, const KernelArgs&) {
    map_binary<C>(out, a, b, n, [](C x, C y) { return std::pow(x, y); });
  }

  static UnaryKernel unary(UnaryOp op) {
    switch (op) {
      case UnaryOp::Abs: return abs;
      case UnaryOp::Neg: return neg;
      case UnaryOp::Square: return square;
      case UnaryOp::Reciprocal: return reciprocal;
      case UnaryOp::Sqrt: return sqrt;
      case UnaryOp::Exp: return exp;
      case UnaryOp::Log: return log;
      default: return nullptr;
    }
  }
  static BinaryKernel binary(BinaryOp op) {
    switch (op) {
      case BinaryOp::Add: return add;
      case BinaryOp::Mul: return multiply;
      case BinaryOp::Div: return divide;
      case BinaryOp::Pow: return pow;
      default: return nullptr;
    }
  }
};

}  // namespace

UnaryKernel complex_unary_kernel(UnaryOp op, DType compute) {
  if (compute == DType::Complex64) return Complex<float>::unary(op);
  if (compute == DType::Complex128) return Complex<double>::unary(op);
  return nullptr;
}

BinaryKernel complex_binary_kernel(BinaryOp op, DType compute) {
  if (compute == DType::Complex64) return Complex<float>::binary(op);
  if (compute == DType::Complex128) return Complex<double>::binary(op);
  return nullptr;
}

}  // namespace kiln::cpu
