// CPU kernels of the pointwise_extra family and their scalar definitions (tests use
// these as references).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/pointwise_extra.h"
#include "kiln/error.h"

namespace kiln::cpu {

// Degrees past this are refused: the recurrence is O(n) per element.
inline constexpr int64_t kMaxLaguerreDegree = int64_t{1} << 31;

// PyTorch's laguerre_polynomial_l_forward (ATen/native/Math.h), term by term: the float
// n truncated to an integer; n < 0 gives 0, x == 0 or n == 0 give 1, n == 1 gives 1 - x,
// then L_{k+1} = ((2k + (1 - x)) L_k - k L_{k-1}) / (k + 1).
template <typename T>
T laguerre_polynomial_l_scalar(T x, T n_value) {
  if (std::isnan(n_value)) return n_value;
  if (n_value < T(0)) return T(0);
  KILN_CHECK(n_value < static_cast<T>(kMaxLaguerreDegree), "laguerre_polynomial_l",
             "degree n = {} is past the largest kiln evaluates (2^31; the recurrence is O(n))",
             static_cast<double>(n_value));
  const int64_t n = static_cast<int64_t>(n_value);
  if (std::abs(x) == T(0)) return T(1);
  if (n == 0) return T(1);
  if (n == 1) return T(1) - x;
  T p = T(1), q = T(1) - x, r = q;
  for (int64_t k = 1; k < n; ++k) {
    r = ((T(k + k) + (T(1) - x)) * q - T(k) * p) / T(k + 1);
    p = q;
    q = r;
  }
  return r;
}

void frexp_cpu(const ExecutionContext& ctx, const backend::FrexpProblem& p);
void laguerre_polynomial_l_cpu(const ExecutionContext& ctx, const backend::LaguerreProblem& p);

}  // namespace kiln::cpu
