// Plain per-element loops over the contiguous chunks the elementwise engine hands a
// kernel: out[i] = f(in[i]) or f(a[i], b[i]). For integer, complex and libm-bound
// kernels that the compiler vectorises (or cannot) on its own.
#pragma once

#include <cstdint>

namespace kiln::cpu {

template <typename Out, typename In = Out, typename F>
inline void map_unary(char* out, const char* in, int64_t n, F f) {
  Out* o = reinterpret_cast<Out*>(out);
  const In* x = reinterpret_cast<const In*>(in);
  for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
}

template <typename Out, typename In = Out, typename F>
inline void map_binary(char* out, const char* a, const char* b, int64_t n, F f) {
  Out* o = reinterpret_cast<Out*>(out);
  const In* x = reinterpret_cast<const In*>(a);
  const In* y = reinterpret_cast<const In*>(b);
  for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
}

}  // namespace kiln::cpu
