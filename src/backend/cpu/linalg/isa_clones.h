// Plain C++ loops compiled for AVX2 and AVX-512 as well as the build's baseline, and the
// widest the CPU runs picked once at run time (internal to src/backend/cpu/linalg). The
// baseline (SSE2) gives the compiler's vectorised loops 4 float lanes where the machine
// has 8 or 16. Without FMA contraction (ISO C++ mode) every clone computes the same
// values, so results do not depend on the target.
//
//   IsaClones<&kernel<T, N>>::best()(args...)
//
// `kernel` should be [[gnu::always_inline]] inline so that each clone holds its own copy
// compiled for its target.
#pragma once

namespace kiln::cpu::linalg {

template <auto Kernel>
struct IsaClones;

template <typename R, typename... Args, R (*Kernel)(Args...)>
struct IsaClones<Kernel> {
  using Fn = R (*)(Args...);

  static R baseline(Args... args) { return Kernel(args...); }
#if defined(__x86_64__) && defined(__GNUC__)
  __attribute__((target("avx2"))) static R avx2(Args... args) { return Kernel(args...); }
  __attribute__((target("avx512f"))) static R avx512(Args... args) { return Kernel(args...); }
#endif

  static Fn best() {
#if defined(__x86_64__) && defined(__GNUC__)
    static const Fn chosen = __builtin_cpu_supports("avx512f") ? &avx512
                             : __builtin_cpu_supports("avx2")  ? &avx2
                                                               : &baseline;
    return chosen;
#else
    return &baseline;
#endif
  }
};

}  // namespace kiln::cpu::linalg
