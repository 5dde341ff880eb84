// The bf16 dot-product GEMM of prefill (backend/cpu/linear/bf16_dot_gemm.h): the packing,
// the vdpbf16ps tiles against a scalar reference that rounds x to bf16 exactly as the
// kernel does (so the only difference left is float32 accumulation), many-row linear
// with bf16 weights on both paths (KILN_BF16_DOT's switch), and the switch itself.
// The tile tests run only where the CPU has AVX512-BF16 and say so when skipped; the
// float32 path is tested everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/linear/bf16_dot_gemm.h"
#include "kiln/context.h"
#include "kiln/cpu_features.h"
#include "kiln/ops/linear.h"
#include "kiln/scalar_types.h"
#include "bf16_dot_mode.h"
#include "linear_test_util.h"

namespace {

using namespace kiln;
using namespace linear_test;
namespace bd = cpu::bf16dot;

using bf16_dot_test::Bf16DotMode;

// Random bf16 bit patterns of normal values around 1 (no subnormals: vdpbf16ps reads them
// as zero, a documented difference from an IEEE sum).
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& b : v) b = float_to_bf16_bits(dist(rng));
  return v;
}

double bf16(uint16_t bits) { return static_cast<double>(bf16_bits_to_float(bits)); }

TEST(Bf16DotGemm, PackBlockLayout) {
  // Odd K: the last pair's high half is zero; lanes past `count` are zero.
  for (int64_t K : {0, 1, 2, 5, 32, 33}) {
    const int count = 3;
    std::vector<std::vector<uint16_t>> rows;
    const uint16_t* ptrs[bd::kBlockTokens];
    for (int t = 0; t < count; ++t) {
      rows.push_back(random_bf16(static_cast<size_t>(K), 10 + t));
      ptrs[t] = rows.back().data();
    }
    std::vector<uint32_t> block(static_cast<size_t>(bd::block_words(K)) + 1, 0xDEADBEEFu);
    bd::pack_block(ptrs, count, K, block.data());
    EXPECT_EQ(block.back(), 0xDEADBEEFu) << "wrote past block_words(" << K << ")";
    for (int64_t p = 0; p < (K + 1) / 2; ++p) {
      for (int t = 0; t < bd::kBlockTokens; ++t) {
        const uint32_t word = block[static_cast<size_t>(p * bd::kBlockTokens + t)];
        const uint32_t lo = t < count ? rows[t][2 * p] : 0;
        const uint32_t hi = t < count && 2 * p + 1 < K ? rows[t][2 * p + 1] : 0;
        ASSERT_EQ(word, lo | (hi << 16)) << "K=" << K << " pair " << p << " lane " << t;
      }
    }
  }
}

TEST(Bf16DotGemm, RoundToBf16IsRoundToNearestEven) {
  const std::vector<float> x = {1.0f, 1.00390625f, 1.01171875f, -3.3f, 1e-30f, 65504.0f, 3.4e38f};
  std::vector<uint16_t> out(x.size());
  std::vector<float> wide(x.size());
  bd::round_to_bf16(DType::Float32, x.data(), static_cast<int64_t>(x.size()), out.data(), wide.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(out[i], float_to_bf16_bits(x[i])) << x[i];
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  EXPECT_EQ(out[1], 0x3F80);
  EXPECT_EQ(out[2], 0x3F82);
}

// dot_rows against the double sum of the same bf16 products: float32 accumulation of K
// exact products in order errs by at most gamma_K * sum |w x| <= K * 2^-24 * (1 + small)
// of the magnitude (Higham 3.1); 2 K 2^-24 leaves a factor 2.
void check_dot_rows(int64_t rows, int64_t K, int tokens, int64_t ldw_pad, int64_t ld_pad, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "rows=" << rows << " K=" << K << " tokens=" << tokens << " ldw pad " << ldw_pad);
  const int blocks = tokens > static_cast<int>(bd::kBlockTokens) ? 2 : 1;
  const int64_t ldw = K + ldw_pad;
  const std::vector<uint16_t> w = random_bf16(static_cast<size_t>(std::max<int64_t>(rows * ldw, 1)), seed);
  std::vector<std::vector<uint16_t>> x;
  for (int t = 0; t < tokens; ++t) x.push_back(random_bf16(static_cast<size_t>(K), seed * 31 + t));
  const int64_t bw = bd::block_words(K) + 16;  // a block stride past the block's end
  std::vector<uint32_t> packed(static_cast<size_t>(2 * bw), 0u);
  for (int b = 0; b < blocks; ++b) {
    const uint16_t* ptrs[bd::kBlockTokens];
    const int count = std::min<int>(static_cast<int>(bd::kBlockTokens), tokens - b * static_cast<int>(bd::kBlockTokens));
    for (int t = 0; t < count; ++t) ptrs[t] = x[static_cast<size_t>(b * bd::kBlockTokens + t)].data();
    bd::pack_block(ptrs, count, K, packed.data() + b * bw);
  }
  const int64_t ld = blocks * bd::kBlockTokens + ld_pad;
  std::vector<float> sums(static_cast<size_t>(std::max<int64_t>(rows * ld, 1)), NAN);
  bd::dot_rows(w.data(), ldw, rows, packed.data(), bw, tokens, K, sums.data(), ld);
  // Lanes up to the next multiple of 8 are written (zero past `tokens`), none after.
  const int written = (tokens + 7) / 8 * 8;
  for (int64_t r = 0; r < rows; ++r) {
    for (int t = written; t < ld; ++t) ASSERT_TRUE(std::isnan(sums[static_cast<size_t>(r * ld + t)])) << "lane " << t;
    for (int t = 0; t < written; ++t) {
      double want = 0, mag = 0;
      for (int64_t k = 0; t < tokens && k < K; ++k) {
        const double p = bf16(w[static_cast<size_t>(r * ldw + k)]) * bf16(x[static_cast<size_t>(t)][static_cast<size_t>(k)]);
        want += p;
        mag += std::fabs(p);
      }
      const double got = sums[static_cast<size_t>(r * ld + t)];
      ASSERT_NEAR(got, want, 2.0 * static_cast<double>(K) * 0x1p-24 * mag) << "row " << r << " token " << t;
    }
  }
}

TEST(Bf16DotGemm, DotRowsMatchesScalarReference) {
  SKIP_WITHOUT_BF16_DOT();
  uint64_t seed = 1;
  // Rows: 0, 1, the 4- and 12-row tiles and their tails. K: 0, 1, odd, 16 lanes +- 1,
  // 32 (a pair step of 16 lanes) +- 1, one prefetch line of pairs +- 1.
  for (int64_t rows : {0, 1, 3, 4, 5, 11, 12, 13, 25}) {
    for (int64_t K : {0, 1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65}) {
      for (int tokens : {1, 7, 8, 9, 15, 16, 17, 24, 25, 31, 32}) check_dot_rows(rows, K, tokens, (rows + K) % 3, tokens % 2, seed++);
    }
  }
  check_dot_rows(12, 2049, 32, 7, 0, 999);  // many prefetch lines
  check_dot_rows(13, 2049, 20, 0, 3, 998);
}

// Many-row linear, bf16 weights and activations, against the double reference: x is
// bf16 already, so rounding it changes nothing and only the float32 accumulation and the
// one output rounding differ (linear_test::expect_close's bound).
void check_linear_bf16(int64_t M, int64_t N, int64_t K, bool bias, bool strided_x, uint64_t seed) {
  const std::string what = "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                           (bias ? " bias" : "") + (strided_x ? " x transposed" : "");
  const Tensor w = random_tensor({N, K}, DType::BFloat16, seed);
  const Tensor x = strided_x ? random_tensor({K, M}, DType::BFloat16, seed + 1).t()
                             : random_tensor({M, K}, DType::BFloat16, seed + 1);
  const Tensor b = bias ? random_tensor({N}, DType::BFloat16, seed + 2) : Tensor();
  const Reference ref = reference_linear(values(x), values(w), bias ? values(b) : std::vector<double>{}, M, N, K);
  expect_close(bias ? linear(x, w, b) : linear(x, w), ref, K, what);
}

void linear_sweep() {
  uint64_t seed = 500;
  for (int64_t M : {2, 15, 16, 17, 33}) {
    for (int64_t N : {1, 11, 12, 13, 40}) {
      for (int64_t K : {1, 2, 3, 17, 64, 65}) check_linear_bf16(M, N, K, (M + N + K) % 2 == 0, M == 17, seed += 3);
    }
  }
  check_linear_bf16(300, 100, 700, true, false, 7);  // several chunks of blocks and panels
}

TEST(Bf16DotGemm, LinearOnTheBf16DotPath) {
  SKIP_WITHOUT_BF16_DOT();
  const Bf16DotMode on(1);
  ASSERT_TRUE(bf16_dot_enabled());
  linear_sweep();
}

TEST(Bf16DotGemm, LinearOnTheFloat32Path) {
  const Bf16DotMode off(0);
  ASSERT_FALSE(bf16_dot_enabled());
  linear_sweep();
}

// float32 activations (not reachable through `linear`, whose activations take the weight's
// dtype, but the kernel accepts them): the reference rounds x to bf16 first, so the bound
// stays float32 accumulation only.
TEST(Bf16DotGemm, Float32ActivationsAreRoundedToBf16) {
  SKIP_WITHOUT_BF16_DOT();
  const int64_t M = 21, N = 14, K = 37;
  const Tensor w = random_tensor({N, K}, DType::BFloat16, 70);
  const Tensor x = random_tensor({M, K}, DType::Float32, 71);
  const Tensor b = random_tensor({N}, DType::Float32, 72);
  for (DType dt : {DType::Float32, DType::Float16}) {
    const Tensor xd = x.to(dt), bd_ = b.to(dt);
    Tensor y = empty({M, N}, dt);
    backend::LinearWeight lw;
    lw.data = w.data_ptr();
    lw.dtype = DType::BFloat16;
    lw.row_stride = K;
    lw.N = N;
    lw.K = K;
    backend::LinearActivations act;
    act.dtype = dt;
    act.x = xd.data_ptr();
    act.M = M;
    act.bias = bd_.data_ptr();
    act.y = y.data_ptr();
    cpu::linear_gemm_bf16_dot(current_context().pool(), lw, act);
    const Reference ref = reference_linear(values(xd.to(DType::BFloat16)), values(w), values(bd_), M, N, K);
    expect_close(y, ref, K, "x " + std::string(dtype_name(dt)));
  }
}

TEST(Bf16DotGemm, ThreadCountDoesNotChangeTheResult) {
  SKIP_WITHOUT_BF16_DOT();
  const Bf16DotMode on(1);
  const Tensor w = random_tensor({150, 333}, DType::BFloat16, 80);
  const Tensor x = random_tensor({70, 333}, DType::BFloat16, 81);
  std::vector<std::vector<double>> outs;
  for (int threads : {1, 2, 3}) {
    const ThreadsScope scope(threads);
    outs.push_back(values(linear(x, w)));
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

TEST(Bf16DotGemm, EmptyExtentsOnBothPaths) {
  for (int mode : {0, 1}) {
    const Bf16DotMode m(mode);
    const Tensor b = random_tensor({5}, DType::BFloat16, 90);
    const std::vector<double> yv = values(linear(empty({3, 0}, DType::BFloat16), empty({5, 0}, DType::BFloat16), b));
    const std::vector<double> bv = values(b);
    for (size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(yv[i], bv[i % 5]);
    EXPECT_EQ(linear(empty({0, 7}, DType::BFloat16), random_tensor({5, 7}, DType::BFloat16, 91)).sizes(),
              (Shape{0, 5}));
    EXPECT_EQ(linear(random_tensor({3, 7}, DType::BFloat16, 92), empty({0, 7}, DType::BFloat16)).sizes(),
              (Shape{3, 0}));
  }
}

TEST(Bf16DotGemm, SwitchFollowsTheCpu) {
  {
    const Bf16DotMode on(1);
    EXPECT_EQ(bf16_dot_enabled(), cpu_has_bf16_dot());  // never on a CPU without it
  }
  {
    const Bf16DotMode off(0);
    EXPECT_FALSE(bf16_dot_enabled());
  }
}

}  // namespace
