// Helpers of the autograd tests: float64 leaves (contiguous, transposed or strided) and
// gradcheck / gradgradcheck as gtest expectations.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <complex>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/tensor.h"

namespace kiln::autograd_test {

using autograd::Function;
using autograd::GradcheckOptions;
using autograd::gradcheck_mismatch;
using autograd::gradgradcheck_mismatch;

// Standard normal float64 (or complex128) values, a leaf that requires grad.
inline Tensor leaf(const Shape& sizes, uint64_t seed, DType dtype = DType::Float64) {
  Generator gen(seed);
  Tensor t = randn(sizes, DType::Float64, &gen);
  if (dtype == DType::Complex128) {
    Tensor im = randn(sizes, DType::Float64, &gen);
    t = add(t.to(DType::Complex128), mul(im.to(DType::Complex128), Scalar(std::complex<double>(0, 1))));
  } else if (dtype != DType::Float64) {
    t = t.to(dtype);
  }
  return t.requires_grad_(true);
}

// The same values laid out transposed in memory (a non-contiguous leaf, >= 2-D).
inline Tensor transposed_leaf(const Shape& sizes, uint64_t seed, DType dtype = DType::Float64) {
  Shape swapped = sizes;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  Tensor base = leaf(swapped, seed, dtype).detach();
  return base.transpose(-1, -2).requires_grad_(true);
}

// Every other element of a twice-as-long last dim (a strided leaf).
inline Tensor strided_leaf(const Shape& sizes, uint64_t seed) {
  Shape wide = sizes;
  wide.back() *= 2;
  return leaf(wide, seed).detach().slice(-1, 0, std::nullopt, 2).requires_grad_(true);
}

// A leaf with values in [lo, lo + 1) (for log, sqrt, pow bases, ...).
inline Tensor positive_leaf(const Shape& sizes, uint64_t seed, double lo = 0.5) {
  Generator gen(seed);
  return add(rand(sizes, DType::Float64, &gen), Scalar(lo)).requires_grad_(true);
}

// An int64 index tensor holding `values` in `shape`.
inline Tensor indices(const std::vector<int64_t>& values, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::Int64);
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

inline void expect_gradcheck(const Function& fn, const std::vector<Tensor>& inputs, double atol = 1e-6) {
  GradcheckOptions o;
  o.atol = atol;
  EXPECT_EQ(gradcheck_mismatch(fn, inputs, o), "");
}

inline void expect_gradgradcheck(const Function& fn, const std::vector<Tensor>& inputs, double atol = 1e-5) {
  GradcheckOptions o;
  o.atol = atol;
  EXPECT_EQ(gradgradcheck_mismatch(fn, inputs, o, 7), "");
}

// fn of one tensor returning one tensor, as a gradcheck Function.
template <typename F>
Function one(F f) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; };
}
template <typename F>
Function two(F f) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0], x[1])}; };
}

}  // namespace kiln::autograd_test
