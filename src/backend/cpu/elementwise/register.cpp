// Installs the CPU kernels of the elementwise family: each entry looks its kernel up
// once per call and runs it on the loop engine (common/loops.h), which splits the
// elements over the context's pool and hands the kernel contiguous chunks.
#include "backend/cpu/common/loops.h"
#include "backend/cpu/elementwise/activation_fused_kernels.h"
#include "backend/cpu/elementwise/elementwise_kernels.h"
#include "backend/elementwise.h"
#include "kiln/error.h"

namespace kiln::cpu {
namespace {

// Front ends ask supports_* first; this guards a caller that did not.
template <typename Kernel>
Kernel found(Kernel kernel, int op, DType compute) {
  KILN_CHECK_KIND(kernel != nullptr, NotImplemented, "elementwise", "no CPU kernel for op {} on {}", op,
                  dtype_name(compute));
  return kernel;
}

void run_unary(const ExecutionContext& ctx, const backend::UnaryProblem& p) {
  const UnaryKernel kernel = found(unary_kernel(p.op, p.compute), static_cast<int>(p.op), p.compute);
  const KernelArgs& args = p.args;
  elementwise_loop<1>(ctx.pool(), p.out, p.out_compute, {&p.in}, {p.compute},
                      [&](char* o, const char* a, int64_t n) { kernel(o, a, n, args); });
}

void run_binary(const ExecutionContext& ctx, const backend::BinaryProblem& p) {
  const BinaryKernel kernel = found(binary_kernel(p.op, p.compute), static_cast<int>(p.op), p.compute);
  const KernelArgs& args = p.args;
  elementwise_loop<2>(ctx.pool(), p.out, p.out_compute, {&p.a, &p.b}, {p.compute, p.compute},
                      [&](char* o, const char* x, const char* y, int64_t n) { kernel(o, x, y, n, args); });
}

void run_ternary(const ExecutionContext& ctx, const backend::TernaryProblem& p) {
  const TernaryKernel kernel = found(ternary_kernel(p.op, p.compute), static_cast<int>(p.op), p.compute);
  const KernelArgs& args = p.args;
  const DType first = p.op == TernaryOp::Where ? DType::Bool : p.compute;
  elementwise_loop<3>(ctx.pool(), p.out, p.out_compute, {&p.a, &p.b, &p.c}, {first, p.compute, p.compute},
                      [&](char* o, const char* x, const char* y, const char* z, int64_t n) {
                        kernel(o, x, y, z, n, args);
                      });
}

template <typename T>
void silu_and_mul_as(const ExecutionContext& ctx, const backend::SiluAndMulProblem& p) {
  elementwise_loop<2>(ctx.pool(), p.out, p.compute, {&p.gate, &p.up}, {p.compute, p.compute},
                      [](char* y, const char* g, const char* u, int64_t n) {
                        mul_silu(reinterpret_cast<const T*>(u), reinterpret_cast<const T*>(g), reinterpret_cast<T*>(y),
                                 n);
                      });
}

const bool registered = [] {
  backend::ElementwiseKernels k;
  k.supports_unary = [](UnaryOp op, DType compute) { return unary_kernel(op, compute) != nullptr; };
  k.supports_binary = [](BinaryOp op, DType compute) { return binary_kernel(op, compute) != nullptr; };
  k.supports_ternary = [](TernaryOp op, DType compute) { return ternary_kernel(op, compute) != nullptr; };
  k.unary = &run_unary;
  k.binary = &run_binary;
  k.ternary = &run_ternary;
  k.silu_and_mul = [](const ExecutionContext& ctx, const backend::SiluAndMulProblem& p) {
    if (p.compute == DType::Float64) {
      silu_and_mul_as<double>(ctx, p);
    } else {
      silu_and_mul_as<float>(ctx, p);
    }
  };
  backend::elementwise_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
