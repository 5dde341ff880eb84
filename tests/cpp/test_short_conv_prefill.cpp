// LFM2's short-conv block over a whole prompt (one causal_conv1d call) against a float64
// reference and against the same tokens fed one at a time (the decode path), including
// the carried conv state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"
#include "llm/blocks/short_conv_block.h"
#include "llm/kv_cache.h"

namespace kiln::llm {
namespace {

constexpr int64_t kHidden = 17;  // odd: no SIMD multiple
constexpr int64_t kTaps = 3;

struct Fixture {
  ShortConvBlock block;
  std::vector<float> in_w, out_w, taps;  // [3H, H], [H, H], [L, H]

  explicit Fixture(uint64_t seed) {
    Generator g(seed);
    const Tensor in = randn({3 * kHidden, kHidden}, DType::Float32, &g);
    const Tensor out = randn({kHidden, kHidden}, DType::Float32, &g);
    block.kernel = randn({kTaps, kHidden}, DType::Float32, &g);
    block.hidden = kHidden;
    block.in_proj = Linear(in, std::nullopt);
    block.out_proj = Linear(out, std::nullopt);
    in_w.assign(in.data<float>(), in.data<float>() + in.numel());
    out_w.assign(out.data<float>(), out.data<float>() + out.numel());
    taps.assign(block.kernel.data<float>(), block.kernel.data<float>() + block.kernel.numel());
  }

  static KvCache cache() { return KvCache({MixerKind::ShortConv}, 1, 1, kTaps, kHidden, 8, DType::Float32); }

  // float64 reference over the tokens of h [T, H] with zero history (spec §3.2).
  std::vector<double> reference(const Tensor& h) const {
    const int64_t T = h.size(0), H = kHidden;
    const float* x = h.data<float>();
    std::vector<double> bcx(static_cast<size_t>(T * 3 * H)), u(static_cast<size_t>(T * H));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < 3 * H; ++o) {
        double s = 0;
        for (int64_t i = 0; i < H; ++i) s += double(in_w[o * H + i]) * x[t * H + i];
        bcx[t * 3 * H + o] = s;
      }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < H; ++c) u[t * H + c] = bcx[t * 3 * H + c] * bcx[t * 3 * H + 2 * H + c];
    std::vector<double> y(static_cast<size_t>(T * H)), out(static_cast<size_t>(T * H));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < H; ++c) {
        double conv = 0;
        for (int64_t j = 0; j < kTaps; ++j) {
          const int64_t src = t - (kTaps - 1) + j;
          if (src >= 0) conv += double(taps[j * H + c]) * u[src * H + c];
        }
        y[t * H + c] = bcx[t * 3 * H + H + c] * conv;
      }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < H; ++o) {
        double s = 0;
        for (int64_t i = 0; i < H; ++i) s += double(out_w[o * H + i]) * y[t * H + i];
        out[t * H + o] = s;
      }
    return out;
  }
};

// Max |a - b| over max(1, max |b|).
double relative_max_difference(const Tensor& a, const std::vector<double>& b) {
  const Tensor af = a.contiguous();
  double diff = 0, scale = 1;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(af.data<float>()[i]) - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

// float32 throughout: three dot products of length <= 3H in series plus the gating
// products, each erring by at most K u (u = 2^-24, K = 51): well under 1e-5 relative.
constexpr double kBound = 1e-5;

TEST(ShortConvPrefill, WholePromptMatchesReference) {
  const Fixture f(3);
  for (int64_t T : {2, 3, 5, 16}) {
    SCOPED_TRACE(T);
    Generator g(100 + static_cast<uint64_t>(T));
    const Tensor h = randn({T, kHidden}, DType::Float32, &g);
    KvCache cache = Fixture::cache();
    const Tensor out = f.block.forward(h, cache, 0);
    ASSERT_EQ(out.sizes(), (Shape{T, kHidden}));
    EXPECT_LT(relative_max_difference(out, f.reference(h)), kBound);
  }
}

TEST(ShortConvPrefill, PromptThenTokensMatchesTokenByToken) {
  const Fixture f(5);
  const int64_t T = 9;
  Generator g(7);
  const Tensor h = randn({T, kHidden}, DType::Float32, &g);
  const std::vector<double> want = f.reference(h);

  // Token by token (the decode path) against prompt pieces (the prefill path) of 4, 1
  // (decode continuing a prompt) and 4 (a prompt continuing from a carried state).
  KvCache steps = Fixture::cache(), pieces = Fixture::cache();
  std::vector<Tensor> step_out, piece_out;
  for (int64_t t = 0; t < T; ++t) step_out.push_back(f.block.forward(h.narrow(0, t, 1).contiguous(), steps, 0));
  piece_out.push_back(f.block.forward(h.narrow(0, 0, 4).contiguous(), pieces, 0));
  piece_out.push_back(f.block.forward(h.narrow(0, 4, 1).contiguous(), pieces, 0));
  piece_out.push_back(f.block.forward(h.narrow(0, 5, 4).contiguous(), pieces, 0));

  const Tensor stepped = cat(step_out, 0), pieced = cat(piece_out, 0);
  EXPECT_LT(relative_max_difference(stepped, want), kBound);
  EXPECT_LT(relative_max_difference(pieced, want), kBound);
  // The state is the last L-1 values of u; one-row and many-row projections sum in
  // different orders, so the two paths' u agree to float32 rounding.
  const Tensor a = steps.conv_state(0), b = pieces.conv_state(0);
  ASSERT_EQ(a.sizes(), (Shape{kTaps - 1, kHidden}));
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.data<float>()[i], y = b.data<float>()[i];
    EXPECT_NEAR(x, y, kBound * std::max(1.0f, std::abs(x))) << i;
  }
}

}  // namespace
}  // namespace kiln::llm
