// The float64 reference of moe_experts and its test driver, shared by test_moe.cpp and
// test_moe_tiled.cpp: random experts of every weight dtype, the reference forward with a
// bound on its rounding error, and a check of one case.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/cpu_features.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/moe.h"
#include "linear_test_util.h"

namespace moe_test {

using namespace kiln;
using linear_test::random_fp8;
using linear_test::random_tensor;
using linear_test::values;

// Expert weights as doubles (FP8 dequantised exactly: e4m3 value times its scale).
struct DenseExpert {
  std::vector<double> gate, up, down;  // [I, H], [I, H], [H, I]
};

inline std::vector<double> dense_values(const Tensor& w, const std::optional<Tensor>& scale) {
  if (w.dtype() != DType::Float8_e4m3fn) return values(w);
  std::vector<double> v = values(w.to(DType::Float32));
  const std::vector<double> s = values(*scale);
  const int64_t rows = w.size(0), cols = w.size(1), col_blocks = (cols + 127) / 128;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      v[r * cols + c] *= scale->dim() == 1 ? s[r] : s[r / 128 * col_blocks + c / 128];
    }
  }
  return v;
}

inline DenseExpert dense(const SwigluWeights& w) {
  return {dense_values(w.gate, w.gate_scale), dense_values(w.up, w.up_scale), dense_values(w.down, w.down_scale)};
}

// out[t] and the magnitude bound of its rounding error: every dot product's error is at
// most (terms) * 2^-24 * sum |products| (float32 accumulation); the SwiGLU multiplies two
// such values, so the bound carries |gate| and |up| sums through silu (|silu'| <= 1.1).
struct ExpertReference {
  std::vector<double> value, magnitude;
};

inline void add_expert(const DenseExpert& e, const double* x, int64_t H, int64_t I, double w, double* out, double* mag) {
  std::vector<double> act(static_cast<size_t>(I)), act_mag(static_cast<size_t>(I));
  for (int64_t i = 0; i < I; ++i) {
    double g = 0, u = 0, ga = 0, ua = 0;
    for (int64_t h = 0; h < H; ++h) {
      g += e.gate[i * H + h] * x[h];
      u += e.up[i * H + h] * x[h];
      ga += std::fabs(e.gate[i * H + h] * x[h]);
      ua += std::fabs(e.up[i * H + h] * x[h]);
    }
    const double silu = g / (1.0 + std::exp(-g));
    act[i] = silu * u;
    act_mag[i] = 1.1 * ga * std::fabs(u) + std::fabs(silu) * ua + std::fabs(act[i]);
  }
  for (int64_t h = 0; h < H; ++h) {
    double s = 0, a = 0;
    for (int64_t i = 0; i < I; ++i) {
      s += e.down[h * I + i] * act[i];
      a += std::fabs(e.down[h * I + i]) * act_mag[i];
    }
    out[h] += w * s;
    mag[h] += std::fabs(w) * a;
  }
}

inline ExpertReference reference_experts(const Tensor& x, const MoeRouting& r, const MoeExperts& experts,
                                  const std::optional<SharedExpert>& shared) {
  const int64_t T = x.size(0), H = x.size(1), k = r.ids.size(1);
  const std::vector<double> xv = values(x), w = values(r.weights), id = values(r.ids);
  std::vector<DenseExpert> dense_experts;
  for (const SwigluWeights& e : experts.experts) dense_experts.push_back(dense(e));
  ExpertReference ref{std::vector<double>(static_cast<size_t>(T * H)), std::vector<double>(static_cast<size_t>(T * H))};
  const int64_t I = experts.experts[0].gate.size(0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      add_expert(dense_experts[static_cast<size_t>(id[t * k + j])], &xv[t * H], H, I, w[t * k + j],
                 &ref.value[t * H], &ref.magnitude[t * H]);
    }
    if (shared.has_value()) {
      const std::vector<double> g = values(shared->gate_weight);
      double dot = 0;
      for (int64_t h = 0; h < H; ++h) dot += g[h] * xv[t * H + h];
      add_expert(dense(shared->weights), &xv[t * H], H, shared->weights.gate.size(0), 1.0 / (1.0 + std::exp(-dot)),
                 &ref.value[t * H], &ref.magnitude[t * H]);
    }
  }
  return ref;
}

inline double unit_roundoff(DType dt) {
  return dt == DType::Float32 ? 0x1p-24 : dt == DType::BFloat16 ? 0x1p-8 : 0x1p-11;
}

// The many-token kernel for bf16 and FP8 experts on the bf16 dot path
// (kiln/cpu_features.h) rounds x and the SwiGLU activations to bf16 before its products
// (FP8 weights decode exactly to bf16, so the weights add nothing); so do the one-token
// FP8 kernels on theirs (cpu::fp8_kernels_round_x_to_bf16(), only where the switch is on).
// Each rounding errs by at most the bf16 unit roundoff 2^-8 of the value (8 significant
// bits): x's moves gate and up by 2^-8 of their magnitude sums ga and ua, so act =
// silu(g) u by 2^-8 (1.1 ga |u| + |silu| ua) <= 2^-8 act_mag (add_expert's bound), and
// act's own rounding adds 2^-8 |act| <= 2^-8 act_mag; the down sum carries 2^-7 act_mag
// per term into 2^-7 of the output magnitude (1.01: the second-order 2^-16). Where a call
// takes a kernel that does not round (FP8 tiles below 6 tokens per expert), the bound is
// merely loose. Zero wherever no rounding path can run: other weight dtypes, no
// AVX512-BF16, KILN_BF16_DOT=0.
inline double bf16_dot_rounding(DType wdtype) {
  if (wdtype == DType::Float8_e4m3fn && cpu::fp8_kernels_round_x_to_bf16()) return 1.01 * 0x1p-7;
  return (wdtype == DType::BFloat16 || wdtype == DType::Float8_e4m3fn) && bf16_dot_enabled() ? 1.01 * 0x1p-7 : 0.0;
}

inline void expect_matches(const Tensor& out, const ExpertReference& ref, int64_t H, int64_t I,
                           double activation_rounding = 0.0) {
  const std::vector<double> got = values(out);
  ASSERT_EQ(got.size(), ref.value.size());
  // One rounding to the output dtype, plus float32 accumulation over H (gate/up) and I
  // (down) terms and the k-way sum: (H + I + 16) * 2^-24 of the magnitude, times 2; plus
  // the bf16 rounding of the activations where the kernel does it (bf16_dot_rounding).
  const double u = unit_roundoff(out.dtype());
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = u * std::fabs(ref.value[i]) +
                       (2.0 * (H + I + 16) * 0x1p-24 + activation_rounding) * ref.magnitude[i] + 1e-30;
    ASSERT_NEAR(got[i], ref.value[i], tol) << "element " << i;
  }
}

// Random experts of `wdtype`: FP8 gets per-row or block scales. Weights scaled so
// activations stay O(1).
inline SwigluWeights random_expert(int64_t H, int64_t I, DType wdtype, bool block_scales, bool strided, uint64_t seed) {
  SwigluWeights w;
  const auto make = [&](int64_t rows, int64_t cols, std::optional<Tensor>& scale, uint64_t s) {
    // `strided`: a view of a wider matrix, so rows are not packed.
    const int64_t wide = strided ? cols + 3 : cols;
    Tensor m;
    if (wdtype == DType::Float8_e4m3fn) {
      m = random_fp8({rows, wide}, s).narrow(1, 0, cols);
      const Shape shape = block_scales ? Shape{(rows + 127) / 128, (cols + 127) / 128} : Shape{rows};
      scale = mul(add(abs(random_tensor(shape, DType::Float32, s + 7)), Scalar(0.5)), Scalar(0.01 / std::sqrt(cols)));
    } else {
      m = mul(random_tensor({rows, wide}, DType::Float32, s), Scalar(1.0 / std::sqrt(cols))).to(wdtype).narrow(1, 0, cols);
    }
    return m;
  };
  w.gate = make(I, H, w.gate_scale, seed);
  w.up = make(I, H, w.up_scale, seed + 100);
  w.down = make(H, I, w.down_scale, seed + 200);
  return w;
}

struct Case {
  int64_t T, H, I, E, k;
  DType wdtype, xdtype;
  bool block_scales = false;
  bool shared = false;
  bool strided = false;
};

// The inputs of one case: experts, the optional shared expert and x (a transposed view
// when the case is strided, to exercise the copy of a non-contiguous x).
struct CaseInputs {
  MoeExperts experts;
  std::optional<SharedExpert> shared;
  Tensor x;
};

inline CaseInputs make_inputs(const Case& c, uint64_t seed) {
  CaseInputs in;
  for (int64_t e = 0; e < c.E; ++e) {
    in.experts.experts.push_back(random_expert(c.H, c.I, c.wdtype, c.block_scales, c.strided, seed + 1000 * e));
  }
  if (c.shared) {
    in.shared = SharedExpert{random_expert(c.H, c.I + 3, c.wdtype, c.block_scales, false, seed + 77),
                             random_tensor({1, c.H}, DType::BFloat16, seed + 78)};
  }
  in.x = c.strided ? random_tensor({c.H, c.T}, c.xdtype, seed + 5).transpose(0, 1)
                   : random_tensor({c.T, c.H}, c.xdtype, seed + 5);
  return in;
}

inline std::string describe(const Case& c) {
  std::ostringstream s;
  s << "T=" << c.T << " H=" << c.H << " I=" << c.I << " E=" << c.E << " k=" << c.k << " w=" << dtype_name(c.wdtype)
    << " x=" << dtype_name(c.xdtype) << " block=" << c.block_scales << " shared=" << c.shared
    << " strided=" << c.strided;
  return s.str();
}

// moe_experts on `in` with routing r against the float64 reference; returns the output.
inline Tensor check_routed(const Case& c, const CaseInputs& in, const MoeRouting& r) {
  SCOPED_TRACE(describe(c));
  const Tensor out = moe_experts(in.x, r.weights, r.ids, in.experts, in.shared);
  EXPECT_EQ(out.sizes(), (Shape{c.T, c.H}));
  EXPECT_EQ(out.dtype(), c.xdtype);
  expect_matches(out, reference_experts(in.x, r, in.experts, in.shared), c.H,
                 std::max(c.I, c.I + (c.shared ? 3 : 0)), bf16_dot_rounding(c.wdtype));
  return out;
}

// A case with softmax routing of random logits.
inline Tensor check_experts(const Case& c, uint64_t seed) {
  const CaseInputs in = make_inputs(c, seed);
  const MoeRouting r = moe_route(random_tensor({c.T, c.E}, DType::Float32, seed + 6), c.k, MoeScoring::Softmax, true);
  return check_routed(c, in, r);
}

}  // namespace moe_test
