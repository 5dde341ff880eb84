// FP8 weights on the bf16 dot tiles (backend/cpu/linear/bf16_dot_gemm.h): the exact
// decode of FP8 rows to bf16, dot_rows_fp8 with row and 128x128 block scales against a
// scalar reference that multiplies the same bf16 x by the dequantised weights (so only
// float32 accumulation differs), many-row linear_fp8 and the many-token MoE expert
// kernel with FP8 experts on both paths (KILN_BF16_DOT's switch) at the edge sizes of
// the tiles: M = 1..40 tokens, K not a multiple of 2, 32 or 128, N not a multiple of 12,
// bias, float32 / bfloat16 / float16 activations. The dot-path tests run only where the
// CPU has AVX512-BF16 and say so when skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/linear/bf16_dot_gemm.h"
#include "backend/cpu/moe/moe_kernels.h"
#include "kiln/context.h"
#include "kiln/cpu_features.h"
#include "kiln/ops/linear.h"
#include "kiln/scalar_types.h"
#include "bf16_dot_mode.h"
#include "linear_test_util.h"
#include "moe_test_util.h"

namespace {

using namespace kiln;
using namespace linear_test;
namespace bd = cpu::bf16dot;

using bf16_dot_test::Bf16DotMode;

int64_t ceil128(int64_t v) { return (v + 127) / 128; }

// The real value of an e4m3fn code as the FP8 kernels read it (NaN codes as +-480).
double fp8_value(uint8_t code) {
  if ((code & 0x7F) == 0x7F) return (code & 0x80) ? -480.0 : 480.0;
  return static_cast<double>(static_cast<float>(Float8_e4m3fn::from_bits(code)));
}

std::vector<float> random_scales(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> s(n);
  for (float& v : s) v = std::ldexp(1.0f + unit(rng), static_cast<int>(rng() % 7) - 10);
  return s;
}

// Every code (the NaN codes included: they read as +-480) decodes to the bf16 pattern of
// its value times 2^-8, at any row stride and length.
TEST(Bf16DotFp8, DecodeRowsIsExact) {
  for (int64_t K : {1, 2, 31, 63, 64, 65, 256, 259}) {
    const int64_t rows = 3, ldc = K + 5, ld = K + 2;
    std::vector<uint8_t> codes(static_cast<size_t>(rows * ldc));
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 37 + 11);
    std::vector<uint16_t> out(static_cast<size_t>(rows * ld), 0xABCD);
    bd::decode_fp8_rows(codes.data(), ldc, rows, K, out.data(), ld);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < ld; ++k) {
        const uint16_t got = out[static_cast<size_t>(r * ld + k)];
        if (k >= K) {
          ASSERT_EQ(got, 0xABCD) << "wrote past the row, K=" << K;
          continue;
        }
        const uint8_t code = codes[static_cast<size_t>(r * ldc + k)];
        ASSERT_EQ(static_cast<double>(bf16_bits_to_float(got)), fp8_value(code) / 256.0)
            << "code 0x" << std::hex << int{code} << std::dec << " K=" << K;
      }
    }
  }
}

// dot_rows_fp8 on decoded rows [n0, n0 + rows) against the double sums of x (bf16) times
// the dequantised weights. Bound: float32 accumulation of K exact products plus, with
// block scales, one rounding for each block's scaled add (an FMA): (K + blocks + 1) *
// 2^-24 of the magnitude, doubled (Higham 3.1 with gamma_n <= 2 n u).
void check_dot_rows_fp8(int64_t rows, int64_t n0, int64_t K, int tokens, bool blocked, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "rows=" << rows << " n0=" << n0 << " K=" << K << " tokens=" << tokens
                                  << (blocked ? " block scales" : " row scales"));
  const int64_t N = n0 + rows, ldc = K + 3;
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> codes(static_cast<size_t>(N * ldc));
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng());
  const std::vector<float> scale =
      random_scales(static_cast<size_t>(blocked ? ceil128(N) * ceil128(K) : N), seed + 1);
  const bd::Fp8Scales scales{scale.data(),
                             blocked ? backend::Fp8ScaleLayout::Block128 : backend::Fp8ScaleLayout::PerRow, K};
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<uint16_t>> x(static_cast<size_t>(tokens));
  for (auto& row : x) {
    row.resize(static_cast<size_t>(K));
    for (uint16_t& v : row) v = float_to_bf16_bits(dist(rng));
  }
  const int64_t bw = bd::block_words(K);
  std::vector<uint32_t> packed(static_cast<size_t>(2 * bw), 0u);
  for (int b = 0; b * 16 < tokens; ++b) {
    const uint16_t* ptrs[bd::kBlockTokens];
    const int count = std::min(16, tokens - 16 * b);
    for (int t = 0; t < count; ++t) ptrs[t] = x[static_cast<size_t>(16 * b + t)].data();
    bd::pack_block(ptrs, count, K, packed.data() + b * bw);
  }
  const int64_t ldw = K + 1;
  std::vector<uint16_t> w(static_cast<size_t>(rows * ldw));
  bd::decode_fp8_rows(codes.data() + n0 * ldc, ldc, rows, K, w.data(), ldw);
  const int64_t ld = 2 * bd::kBlockTokens;
  std::vector<float> sums(static_cast<size_t>(rows * ld), NAN);
  bd::dot_rows_fp8(w.data(), ldw, rows, packed.data(), bw, tokens, K, scales, n0, sums.data(), ld);
  const double blocks = static_cast<double>(ceil128(K));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = n0 + r;
    for (int t = 0; t < tokens; ++t) {
      double want = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double s = blocked ? scale[static_cast<size_t>(n / 128 * ceil128(K) + k / 128)]
                                 : scale[static_cast<size_t>(n)];
        const double p = fp8_value(codes[static_cast<size_t>(n * ldc + k)]) * s *
                         static_cast<double>(bf16_bits_to_float(x[static_cast<size_t>(t)][static_cast<size_t>(k)]));
        want += p;
        mag += std::fabs(p);
      }
      const double tol = 2.0 * (static_cast<double>(K) + 2.0 * blocks + 1.0) * 0x1p-24 * mag;
      ASSERT_NEAR(sums[static_cast<size_t>(r * ld + t)], want, tol) << "row " << n << " token " << t;
    }
  }
}

TEST(Bf16DotFp8, DotRowsFp8MatchesScalarReference) {
  SKIP_WITHOUT_BF16_DOT();
  uint64_t seed = 1;
  for (bool blocked : {false, true}) {
    // Rows across the 128-row scale boundary (n0 = 120), the 12-, 6- and 4-row tiles and tails;
    // K odd, around 32 and around the 128-wide scale blocks; tokens around 8 and 16.
    for (int64_t rows : {1, 5, 6, 7, 12, 13}) {
      for (int64_t n0 : {0, 120}) {
        for (int64_t K : {1, 3, 31, 33, 127, 128, 129, 257, 300}) {
          for (int tokens : {1, 8, 9, 16, 17, 32}) check_dot_rows_fp8(rows, n0, K, tokens, blocked, seed++);
        }
      }
    }
    check_dot_rows_fp8(25, 250, 2049, 31, blocked, 999);
    check_dot_rows_fp8(48, 100, 770, 20, blocked, 998);  // a down item's 48 rows
  }
}

// linear_fp8 (x [M, K] of dtype dt, W [N, K] FP8) against the dequantised double
// reference, x rounded to bf16 where the kernel does (activations_as_used).
void check_linear_fp8(DType dt, int64_t M, int64_t N, int64_t K, bool blocked, bool with_bias, uint64_t seed) {
  const std::string what = std::string(dtype_name(dt)) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                           " K=" + std::to_string(K) + (blocked ? " block scales" : " row scales") +
                           (with_bias ? " +bias" : "") + (bf16_dot_enabled() ? " (bf16 dot)" : " (float32)");
  const Tensor x = random_tensor({M, K}, dt, seed);
  const Tensor q = random_fp8({N, K}, seed + 1);
  const std::vector<float> sv = random_scales(static_cast<size_t>(blocked ? ceil128(N) * ceil128(K) : N), seed + 2);
  Tensor scale = empty(blocked ? Shape{ceil128(N), ceil128(K)} : Shape{N}, DType::Float32);
  std::copy(sv.begin(), sv.end(), scale.data<float>());
  std::optional<Tensor> b;
  if (with_bias) b = random_tensor({N}, dt, seed + 3);
  const std::vector<double> qv = values(q);
  std::vector<double> wv(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const double s = blocked ? sv[static_cast<size_t>(n / 128 * ceil128(K) + k / 128)] : sv[static_cast<size_t>(n)];
      wv[static_cast<size_t>(n * K + k)] = qv[static_cast<size_t>(n * K + k)] * s;
    }
  }
  const Reference ref =
      reference_linear(activations_as_used(x, M, DType::Float8_e4m3fn), wv, b ? values(*b) : std::vector<double>{}, M,
                       N, K);
  const Tensor y = linear_fp8(x, q, scale, b);
  ASSERT_EQ(y.dtype(), dt);
  expect_close(y, ref, K + 2 * ceil128(K), what);
}

constexpr DType kDTypes[] = {DType::Float32, DType::BFloat16, DType::Float16};

void linear_fp8_sweep() {
  uint64_t seed = 100;
  // Every M from 1 to 40 (one row goes to the GEMV kernel; 15/16/17 and 31/32/33 are
  // the block and tile edges) at K = 259 (odd, not a multiple of 32 or 128), N = 25.
  for (int64_t M = 1; M <= 40; ++M) check_linear_fp8(kDTypes[M % 3], M, 25, 259, M % 2 == 0, M % 3 == 0, seed += 4);
  int i = 0;
  for (int64_t M : {2, 16, 17, 33}) {
    for (int64_t K : {1, 3, 33, 129, 257}) {
      for (int64_t N : {1, 13, 130}) {
        for (bool blocked : {false, true}) {
          ++i;
          check_linear_fp8(kDTypes[i % 3], M, N, K, blocked, i % 2 == 0, seed += 4);
        }
      }
    }
  }
  // Several chunks of blocks and panels, and tasks over many tiles.
  check_linear_fp8(DType::BFloat16, 300, 100, 700, true, true, 7);
  check_linear_fp8(DType::Float32, 70, 260, 2100, false, false, 8);
}

TEST(Bf16DotFp8, LinearOnTheBf16DotPath) {
  SKIP_WITHOUT_BF16_DOT();
  const Bf16DotMode on(1);
  ASSERT_TRUE(bf16_dot_enabled());
  linear_fp8_sweep();
}

TEST(Bf16DotFp8, LinearOnTheFloat32Path) {
  const Bf16DotMode off(0);
  ASSERT_FALSE(bf16_dot_enabled());
  linear_fp8_sweep();
}

// One-hot x reads back single weights: on the dot path each must come out as exactly
// e4m3(code) * scale rounded once to float32 (the decode is exact, the 2^8 is exact), for
// every code and both scale layouts.
TEST(Bf16DotFp8, EveryCodeExactOnTheDotPath) {
  SKIP_WITHOUT_BF16_DOT();
  const Bf16DotMode on(1);
  const int64_t N = 256, K = 300;
  Tensor q = empty({N, K}, DType::Float8_e4m3fn);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) q.data<uint8_t>()[n * K + k] = static_cast<uint8_t>((n + k) % 256);
  }
  for (bool blocked : {false, true}) {
    const std::vector<float> sv = random_scales(static_cast<size_t>(blocked ? ceil128(N) * ceil128(K) : N), 5);
    Tensor scale = empty(blocked ? Shape{ceil128(N), ceil128(K)} : Shape{N}, DType::Float32);
    std::copy(sv.begin(), sv.end(), scale.data<float>());
    for (int64_t k : {int64_t{0}, int64_t{129}, int64_t{299}}) {
      Tensor x = zeros({3, K}, DType::Float32);
      for (int64_t m = 0; m < 3; ++m) x.data<float>()[m * K + k] = 1.0f;
      const std::vector<double> y = values(linear_fp8(x, q, scale));
      for (int64_t m = 0; m < 3; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          const uint8_t code = static_cast<uint8_t>((n + k) % 256);
          const float s =
              blocked ? sv[static_cast<size_t>(n / 128 * ceil128(K) + k / 128)] : sv[static_cast<size_t>(n)];
          ASSERT_EQ(y[static_cast<size_t>(m * N + n)], static_cast<double>(static_cast<float>(fp8_value(code)) * s))
              << "code 0x" << std::hex << int{code} << std::dec << " k " << k << (blocked ? " blocked" : "");
        }
      }
    }
  }
}

TEST(Bf16DotFp8, LinearThreadCountDoesNotChangeTheResult) {
  SKIP_WITHOUT_BF16_DOT();
  const Bf16DotMode on(1);
  const Tensor q = random_fp8({150, 333}, 80);
  const Tensor x = random_tensor({70, 333}, DType::BFloat16, 81);
  for (bool blocked : {false, true}) {
    const Tensor scale = full(blocked ? Shape{2, 3} : Shape{150}, Scalar(0.01), DType::Float32);
    std::vector<std::vector<double>> outs;
    for (int threads : {1, 2, 3}) {
      const ThreadsScope scope(threads);
      outs.push_back(values(linear_fp8(x, q, scale)));
    }
    EXPECT_EQ(outs[0], outs[1]);
    EXPECT_EQ(outs[0], outs[2]);
  }
}

// The MoE expert kernel with FP8 experts, forced onto the tiled kernels: the bf16 dot
// tiles where the CPU has them, the float32 FMA tiles with the switch off; each against
// the float64 reference with its own bound (moe_test::bf16_dot_rounding).
class ForceTiled {
 public:
  ForceTiled() { cpu::force_moe_expert_path(cpu::MoeExpertPath::Tiled); }
  ~ForceTiled() { cpu::force_moe_expert_path(cpu::MoeExpertPath::Auto); }
  ForceTiled(const ForceTiled&) = delete;
  ForceTiled& operator=(const ForceTiled&) = delete;
};

void fp8_expert_cases() {
  using moe_test::Case;
  const DType f8 = DType::Float8_e4m3fn;
  // All tokens to one expert, around the 16-token blocks and the 32-token tile pairs;
  // H odd and not a multiple of 32 or 128, I not a multiple of 12 (and I + 3 for the
  // shared expert); both scale layouts; each activation dtype.
  int i = 0;
  for (int64_t T : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40}) {
    for (bool blocked : {false, true}) {
      ++i;
      const Case c{T, 259, 133, 3, 1, f8, kDTypes[i % 3], blocked, i % 4 == 0};
      const moe_test::CaseInputs in = moe_test::make_inputs(c, 700 + i);
      MoeRouting r{add(abs(random_tensor({T, 1}, DType::Float32, 800 + i)), Scalar(0.1)),
                             full({T, 1}, Scalar(1), DType::Int32)};
      moe_test::check_routed(c, in, r);
    }
  }
  // Softmax routing over several experts (uneven groups), strided weights, several down
  // items, row blocks of the block scales.
  moe_test::check_experts({45, 130, 72, 6, 2, f8, DType::BFloat16, true}, 720);
  moe_test::check_experts({37, 65, 27, 4, 3, f8, DType::Float32, false, true, true}, 721);
  moe_test::check_experts({33, 300, 260, 3, 2, f8, DType::Float16, true, true}, 722);
}

TEST(Bf16DotFp8, MoeExpertsOnTheBf16DotPath) {
  SKIP_WITHOUT_BF16_DOT();
  const ForceTiled tiled;
  const Bf16DotMode on(1);
  fp8_expert_cases();
}

TEST(Bf16DotFp8, MoeExpertsOnTheFloat32Path) {
  const ForceTiled tiled;
  const Bf16DotMode off(0);
  fp8_expert_cases();
}

// Auto takes the float32 FMA tiles below 6 tokens per active expert (the dot tiles'
// lanes would be mostly empty) and the dot tiles from there on: bit for bit what the
// forced paths give.
TEST(Bf16DotFp8, AutoPicksTheTilesByTokensPerExpert) {
  SKIP_WITHOUT_BF16_DOT();
  for (DType w : {DType::BFloat16, DType::Float8_e4m3fn}) {
    for (int64_t per_expert : {4, 5, 6, 20}) {
      SCOPED_TRACE(testing::Message() << dtype_name(w) << " " << per_expert << " tokens per expert");
      const moe_test::Case c{2 * per_expert, 70, 36, 2, 1, w, DType::BFloat16};
      const moe_test::CaseInputs in = moe_test::make_inputs(c, 740);
      Tensor ids = empty({c.T, 1}, DType::Int32);
      for (int64_t t = 0; t < c.T; ++t) ids.data<int32_t>()[t] = static_cast<int32_t>(t % 2);
      const Tensor weights = full({c.T, 1}, Scalar(0.5), DType::Float32);
      Tensor automatic;
      {
        const Bf16DotMode on(1);  // whatever KILN_BF16_DOT says
        automatic = moe_experts(in.x, weights, ids, in.experts);
      }
      const ForceTiled tiled;
      std::vector<double> by_path[2];
      for (int mode : {0, 1}) {
        const Bf16DotMode m(mode);
        by_path[mode] = values(moe_experts(in.x, weights, ids, in.experts));
      }
      ASSERT_NE(by_path[0], by_path[1]) << "the two tiles agree bit for bit: the check would see no choice";
      EXPECT_EQ(values(automatic), by_path[per_expert >= 6 ? 1 : 0]);
    }
  }
}

TEST(Bf16DotFp8, MoeThreadCountDoesNotChangeTheResult) {
  SKIP_WITHOUT_BF16_DOT();
  const ForceTiled tiled;
  const Bf16DotMode on(1);
  for (bool blocked : {false, true}) {
    const moe_test::Case c{90, 136, 72, 12, 4, DType::Float8_e4m3fn, DType::Float32, blocked, true};
    const moe_test::CaseInputs in = moe_test::make_inputs(c, 730);
    const MoeRouting r = moe_route(random_tensor({c.T, c.E}, DType::Float32, 731), c.k, MoeScoring::Softmax, true);
    std::vector<std::vector<double>> outs;
    for (int threads : {1, 2, 3}) {
      const ThreadsScope scope(threads);
      outs.push_back(values(moe_experts(in.x, r.weights, r.ids, in.experts, in.shared)));
    }
    EXPECT_EQ(outs[0], outs[1]);
    EXPECT_EQ(outs[0], outs[2]);
  }
}

}  // namespace
