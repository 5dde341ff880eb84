// frexp and laguerre_polynomial_l on the CPU: plain loops split over the pool (both are
// scalar library calls or recurrences per element, nothing a SIMD lane helps with).
#include "backend/cpu/pointwise_extra/pointwise_extra_kernels.h"

#include <cmath>

#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

template <typename T>
void frexp_typed(ThreadPool& pool, const backend::FrexpProblem& p) {
  const T* in = static_cast<const T*>(p.input);
  T* m = static_cast<T*>(p.mantissa);
  pool.parallel_for(p.numel, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int e = 0;
      m[i] = std::frexp(in[i], &e);
      p.exponent[i] = e;
    }
  });
}

template <typename T>
void laguerre_typed(ThreadPool& pool, const backend::LaguerreProblem& p) {
  const T* x = static_cast<const T*>(p.x);
  const T* n = static_cast<const T*>(p.n);
  T* out = static_cast<T*>(p.out);
  pool.parallel_for(p.numel, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = laguerre_polynomial_l_scalar(x[i], n[i]);
  });
}

}  // namespace

void frexp_cpu(const ExecutionContext& ctx, const backend::FrexpProblem& p) {
  if (p.dtype == DType::Float64) frexp_typed<double>(ctx.pool(), p);
  else frexp_typed<float>(ctx.pool(), p);
}

void laguerre_polynomial_l_cpu(const ExecutionContext& ctx, const backend::LaguerreProblem& p) {
  if (p.dtype == DType::Float64) laguerre_typed<double>(ctx.pool(), p);
  else laguerre_typed<float>(ctx.pool(), p);
}

}  // namespace kiln::cpu
