// KILN_STATELESS_UNARY_OP(Name, expr): the functor of an elementwise unary op that keeps
// no state, computing `expr` from the vector x (tag d), for the Highway kernels of
// unary_basic_kernels.cpp and unary_math_kernels.cpp. Used inside each file's per-target
// namespace, where hn and KernelArgs are visible.
#pragma once

#define KILN_STATELESS_UNARY_OP(Name, expr)     \
  template <class D>                            \
  struct Name {                                 \
    D d;                                        \
    Name(D tag, const KernelArgs&) : d(tag) {}  \
    template <class V>                          \
    HWY_INLINE V operator()(V x) const {        \
      return expr;                              \
    }                                           \
  };
