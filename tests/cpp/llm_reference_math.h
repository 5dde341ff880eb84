// The double-precision building blocks of the model tests' reference forwards
// (test_llm_model.cpp, test_llm_hybrid_model.cpp): plain loops written from the spec's
// math (models.md §0), shared so each family's reference holds only what differs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/llm.h"
#include "kiln/tensor.h"
#include "llm/checkpoint.h"

namespace kiln::testing {

using Vec = std::vector<double>;

inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double silu(double x) { return x * sigmoid(x); }

// A checkpoint tensor as doubles; 2-D FP8 weights dequantised with their 128x128 block
// scales (w = fp8 * scale[n / 128][k / 128], spec §5.1).
inline Vec checkpoint_weight(llm::Checkpoint& ckpt, const std::string& name) {
  const Tensor t = ckpt.get(name);
  const Tensor f = t.to(DType::Float32).contiguous();
  Vec v(f.data<float>(), f.data<float>() + f.numel());
  if (t.dtype() == DType::Float8_e4m3fn) {
    const Tensor s = ckpt.get(name + "_scale_inv").to(DType::Float32).contiguous();
    const int64_t n = t.size(0), k = t.size(1), kb = s.size(1);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t col = 0; col < k; ++col) v[r * k + col] *= s.data<float>()[(r / 128) * kb + col / 128];
  }
  return v;
}

// y = W x for W [N, K] stored row-major (rows first .. first + n of a larger table when n >= 0).
inline Vec matvec(const Vec& w, const Vec& x, int64_t first = 0, int64_t n = -1) {
  const int64_t k = static_cast<int64_t>(x.size());
  if (n < 0) n = static_cast<int64_t>(w.size()) / k;
  Vec y(n, 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t col = 0; col < k; ++col) y[r] += w[(first + r) * k + col] * x[col];
  return y;
}

// RMSNorm (§0.1) of x[begin .. begin + w.size()): x / sqrt(mean(x^2) + eps) * (offset + w);
// offset 0 is the plain norm, 1 the zero-centred (1 + w) norm of the Qwen hybrids.
inline Vec rms_norm(const Vec& x, const Vec& w, double eps, double offset, size_t begin = 0) {
  const size_t n = w.size();
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += x[begin + i] * x[begin + i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[begin + i] * inv * (offset + w[i]);
  return y;
}

inline std::vector<Vec> norm_rows(const std::vector<Vec>& x, const Vec& w, double eps, double offset) {
  std::vector<Vec> y;
  for (const Vec& row : x) y.push_back(rms_norm(row, w, eps, offset));
  return y;
}

inline void add_rows(std::vector<Vec>& x, const std::vector<Vec>& y) {
  for (size_t t = 0; t < x.size(); ++t)
    for (size_t i = 0; i < x[t].size(); ++i) x[t][i] += y[t][i];
}

// RoPE, rotate_half (§0.2) over the first d = rotary_dim dims of a head: pairs
// (i, i + d/2), angle pos * theta^(-2i/d); the rest pass through.
inline void rope(Vec& head, int64_t pos, int64_t rotary_dim, double theta) {
  const int64_t d = rotary_dim, half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = pos * std::pow(theta, -2.0 * i / d);
    const double a = head[i], b = head[i + half];
    head[i] = a * std::cos(angle) - b * std::sin(angle);
    head[i + half] = b * std::cos(angle) + a * std::sin(angle);
  }
}

// Causal grouped-query attention (§0.3) with q, k, v as [t][head][E]: for each token t,
// every query head attends to tokens 0 .. t of its KV head (head / (Hq / Hk)) with
// softmax(q . k / sqrt(E)). Returns [t][Hq * E], the heads side by side.
inline std::vector<Vec> causal_attention(const std::vector<std::vector<Vec>>& q,
                                         const std::vector<std::vector<Vec>>& k,
                                         const std::vector<std::vector<Vec>>& v) {
  const int64_t T = static_cast<int64_t>(q.size());
  std::vector<Vec> out(T);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t Hq = static_cast<int64_t>(q[t].size()), Hk = static_cast<int64_t>(k[t].size());
    const int64_t E = static_cast<int64_t>(q[t][0].size());
    Vec concat(Hq * E, 0.0);
    for (int64_t hh = 0; hh < Hq; ++hh) {
      const int64_t kv = hh / (Hq / Hk);
      Vec scores(t + 1);
      double top = -INFINITY;
      for (int64_t s = 0; s <= t; ++s) {
        scores[s] = std::inner_product(q[t][hh].begin(), q[t][hh].end(), k[s][kv].begin(), 0.0) / std::sqrt(E);
        top = std::max(top, scores[s]);
      }
      double total = 0.0;
      for (double& sc : scores) total += sc = std::exp(sc - top);
      for (int64_t s = 0; s <= t; ++s)
        for (int64_t e = 0; e < E; ++e) concat[hh * E + e] += scores[s] / total * v[s][kv][e];
    }
    out[t] = std::move(concat);
  }
  return out;
}

// Rows of doubles as a float32 [rows, cols] tensor.
inline Tensor to_tensor(const std::vector<Vec>& rows) {
  Tensor t = Tensor::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
  float* p = t.data<float>();
  for (const Vec& row : rows)
    for (double v : row) *p++ = static_cast<float>(v);
  return t;
}

// Loads in float32 weights with a float32 cache: what the reference comparisons use.
inline llm::LoadOptions float32_options() {
  llm::LoadOptions o;
  o.weights = llm::WeightFormat::Float32;
  o.cache_dtype = DType::Float32;
  return o;
}

// The prompt every model test runs.
inline const std::vector<int32_t> kPrompt = {17, 3, 250, 101, 42, 7, 311, 5, 64, 198};

}  // namespace kiln::testing
