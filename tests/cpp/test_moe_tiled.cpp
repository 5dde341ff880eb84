// The many-token (register-tiled) moe_experts kernel, forced for every case, against the
// float64 reference of moe_test_util.h and against the GEMV kernel on the same inputs;
// and the tiled kernel's result does not depend on the number of threads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/moe/moe_kernels.h"
#include "kiln/context.h"
#include "kiln/cpu_features.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/moe.h"
#include "bf16_dot_mode.h"
#include "moe_test_util.h"
#include "simd_targets.h"

namespace {

using namespace kiln;
using namespace moe_test;
using cpu::MoeExpertPath;

// Forces one moe_experts path for a scope (process-wide: the tests run one at a time).
class ForcePath {
 public:
  explicit ForcePath(MoeExpertPath path) { cpu::force_moe_expert_path(path); }
  ~ForcePath() { cpu::force_moe_expert_path(MoeExpertPath::Auto); }
  ForcePath(const ForcePath&) = delete;
  ForcePath& operator=(const ForcePath&) = delete;
};

constexpr DType kWide[] = {DType::Float32, DType::BFloat16, DType::Float16};

// Routing given explicitly: ids [T, k] int32, weights [T, k] random in [0.1, 1.1).
MoeRouting fixed_routing(const std::vector<int32_t>& ids, int64_t T, int64_t k, uint64_t seed) {
  MoeRouting r{add(abs(random_tensor({T, k}, DType::Float32, seed)), Scalar(0.1)), empty({T, k}, DType::Int32)};
  std::copy(ids.begin(), ids.end(), r.ids.data<int32_t>());
  return r;
}

TEST(MoeExpertsTiled, WideWeightsMatchReference) {
  const ForcePath tiled(MoeExpertPath::Tiled);
  for (DType w : kWide) {
    check_experts({1, 64, 32, 8, 2, w, w}, 1);                       // one token
    check_experts({37, 17, 5, 4, 3, w, DType::Float32}, 2);          // every tile has a tail
    check_experts({29, 33, 33, 5, 2, w, w, false, true}, 3);         // shared expert (I + 3 rows)
    check_experts({13, 16, 15, 3, 1, w, w, false, false, true}, 4);  // strided weights, transposed x
    check_experts({70, 130, 72, 6, 2, w, DType::BFloat16}, 5);       // several down items
  }
  check_experts({1, 1, 1, 1, 1, DType::BFloat16, DType::BFloat16}, 6);
}

TEST(MoeExpertsTiled, SizesAroundSimdWidths) {
  // 16 float lanes on AVX-512, 8 on AVX2; decoder steps of 2 or 4 vectors; 4-row groups,
  // 4-token tiles and 64-row down items.
  const ForcePath tiled(MoeExpertPath::Tiled);
  for (int64_t h : {7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129}) {
    check_experts({11, h, h + 2, 4, 2, DType::BFloat16, DType::BFloat16}, 100 + h);
    check_experts({6, h, 65 - h / 3, 3, 2, DType::Float8_e4m3fn, DType::Float32, h % 2 == 1}, 200 + h);
  }
}

void fp8_expert_cases() {
  for (DType x : kWide) {
    check_experts({21, 64, 40, 6, 2, DType::Float8_e4m3fn, x}, 10);         // row scales
    check_experts({19, 200, 130, 4, 2, DType::Float8_e4m3fn, x, true}, 11);  // partial 128 blocks
  }
  check_experts({25, 130, 128, 5, 3, DType::Float8_e4m3fn, DType::BFloat16, true, true}, 12);
  check_experts({9, 31, 9, 3, 2, DType::Float8_e4m3fn, DType::Float32, false, true, true}, 13);
  check_experts({40, 300, 260, 3, 2, DType::Float8_e4m3fn, DType::BFloat16, true}, 14);  // 3 row blocks
}

// FP8 experts on the float32 FMA tiles (KILN_BF16_DOT=0 or no AVX512-BF16) and, where the
// CPU has it, on the bf16 dot tiles (test_bf16_dot_fp8.cpp has the dot path's edge sizes).
TEST(MoeExpertsTiled, Fp8WeightsMatchReference) {
  const ForcePath tiled(MoeExpertPath::Tiled);
  for (int mode : {0, 1}) {
    const bf16_dot_test::Bf16DotMode dot(mode);
    SCOPED_TRACE(bf16_dot_enabled() ? "bf16 dot path" : "float32 FMA tiles");
    fp8_expert_cases();
  }
}

TEST(MoeExpertsTiled, RoutingEdgeCases) {
  const ForcePath tiled(MoeExpertPath::Tiled);
  // Most experts empty: 3 tokens over 16 experts.
  check_experts({3, 40, 24, 16, 2, DType::BFloat16, DType::BFloat16}, 30);
  // Top-k from 1 to 10 over 10 experts (k = 10: every token to every expert).
  for (int64_t k = 1; k <= 10; ++k) check_experts({9, 48, 20, 10, k, DType::BFloat16, DType::Float32}, 40 + k);
  // Every token to one expert, more tokens than a few tiles; with the shared expert.
  for (DType w : {DType::BFloat16, DType::Float8_e4m3fn}) {
    const Case c{67, 80, 36, 5, 1, w, DType::BFloat16, false, true};
    const CaseInputs in = make_inputs(c, 50);
    check_routed(c, in, fixed_routing(std::vector<int32_t>(67, 3), c.T, 1, 51));
  }
  // Two choices of one token going to the same expert add up.
  const Case twice{5, 24, 12, 2, 2, DType::Float32, DType::Float32};
  check_routed(twice, make_inputs(twice, 60), fixed_routing({1, 1, 0, 1, 1, 1, 0, 0, 1, 0}, 5, 2, 61));
}

TEST(MoeExpertsTiled, AgreesWithGemvPath) {
  // Both paths round float32 sums of the same products to the output dtype, so they differ
  // by at most the sum of their distances to the reference: twice expect_matches' bound.
  for (const Case& c : {Case{48, 96, 40, 8, 4, DType::BFloat16, DType::BFloat16, false, true},
                        Case{33, 130, 72, 6, 3, DType::Float8_e4m3fn, DType::Float32, true}}) {
    SCOPED_TRACE(describe(c));
    const CaseInputs in = make_inputs(c, 70);
    const MoeRouting r = moe_route(random_tensor({c.T, c.E}, DType::Float32, 71), c.k, MoeScoring::Softmax, true);
    Tensor gemv, tiled;
    {
      const ForcePath p(MoeExpertPath::Gemv);
      gemv = moe_experts(in.x, r.weights, r.ids, in.experts, in.shared);
    }
    {
      const ForcePath p(MoeExpertPath::Tiled);
      tiled = moe_experts(in.x, r.weights, r.ids, in.experts, in.shared);
    }
    const ExpertReference ref = reference_experts(in.x, r, in.experts, in.shared);
    const std::vector<double> a = values(gemv), b = values(tiled);
    const int64_t I = c.I + (c.shared ? 3 : 0);
    const double u = unit_roundoff(c.xdtype);
    for (size_t i = 0; i < a.size(); ++i) {
      // One side may round its activations to bf16 (bf16_dot_rounding): the tiled one for
      // bf16 experts, the GEMV one for FP8 experts; never both.
      const double tol = 2.0 * (u * std::fabs(ref.value[i]) + 2.0 * (c.H + I + 16) * 0x1p-24 * ref.magnitude[i]) +
                         bf16_dot_rounding(c.wdtype) * ref.magnitude[i];
      ASSERT_NEAR(a[i], b[i], tol) << "element " << i;
    }
  }
}

TEST(MoeExpertsTiled, ThreadCountDoesNotChangeTheResult) {
  const ForcePath tiled(MoeExpertPath::Tiled);
  for (const Case& c : {Case{90, 136, 72, 12, 4, DType::BFloat16, DType::BFloat16, false, true},
                        Case{64, 200, 130, 8, 3, DType::Float8_e4m3fn, DType::Float32, true}}) {
    SCOPED_TRACE(describe(c));
    const CaseInputs in = make_inputs(c, 80);
    const MoeRouting r = moe_route(random_tensor({c.T, c.E}, DType::Float32, 81), c.k, MoeScoring::Softmax, true);
    std::vector<std::vector<double>> outs;
    for (int threads : {1, 2, 3}) {
      const ThreadsScope scope(threads);
      outs.push_back(values(moe_experts(in.x, r.weights, r.ids, in.experts, in.shared)));
    }
    EXPECT_EQ(outs[0], outs[1]);  // bit for bit (values() widens exactly)
    EXPECT_EQ(outs[0], outs[2]);
  }
}

TEST(MoeExpertsTiled, EveryTarget) {
  const ForcePath tiled(MoeExpertPath::Tiled);
  // Both paths: the FMA tiles decode per target, the bf16 dot tiles' FP8 decode too.
  for (int mode : {0, 1}) {
    const bf16_dot_test::Bf16DotMode dot(mode);
    simd_targets::for_each(cpu::moe_simd_targets(), [] {
      for (DType w : kWide) check_experts({9, 70, 37, 5, 2, w, DType::BFloat16, false, true}, 20);
      check_experts({10, 130, 40, 4, 2, DType::Float8_e4m3fn, DType::BFloat16, true}, 21);
      check_experts({7, 65, 40, 4, 2, DType::Float8_e4m3fn, DType::Float32}, 22);
    });
  }
}

using bf16_dot_test::Bf16DotMode;

void bf16_expert_cases() {
  check_experts({37, 17, 5, 4, 3, DType::BFloat16, DType::Float32}, 2);   // tails everywhere, odd H and I
  check_experts({29, 33, 33, 5, 2, DType::BFloat16, DType::BFloat16, false, true}, 3);  // shared (I + 3)
  check_experts({13, 16, 15, 3, 1, DType::BFloat16, DType::Float16, false, false, true}, 4);  // strided
  check_experts({70, 130, 72, 6, 2, DType::BFloat16, DType::BFloat16}, 5);  // several down items
  check_experts({1, 1, 1, 1, 1, DType::BFloat16, DType::BFloat16}, 6);
  // 16 tokens per block +- 1 for one expert, and 33 (a pair of blocks and one more).
  for (int64_t T : {15, 16, 17, 33}) {
    const Case c{T, 48, 26, 3, 1, DType::BFloat16, DType::BFloat16, false, true};
    check_routed(c, make_inputs(c, 600 + T), fixed_routing(std::vector<int32_t>(T, 1), T, 1, 601));
  }
}

// The bf16 experts through the vdpbf16ps kernel (bf16 x and activations) where the CPU has
// it, and through the float32 tiles with the switch off; each against the reference with
// its own bound (bf16_dot_rounding is zero for the second).
TEST(MoeExpertsTiled, Bf16ExpertsOnTheBf16DotPath) {
  if (!cpu_has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the bf16 dot MoE kernel is not run here";
  const ForcePath tiled(MoeExpertPath::Tiled);
  const Bf16DotMode on(1);
  bf16_expert_cases();
}

TEST(MoeExpertsTiled, Bf16ExpertsOnTheFloat32Path) {
  const ForcePath tiled(MoeExpertPath::Tiled);
  const Bf16DotMode off(0);
  bf16_expert_cases();
}

TEST(MoeExpertsTiled, Bf16DotThreadCountDoesNotChangeTheResult) {
  if (!cpu_has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the bf16 dot MoE kernel is not run here";
  const ForcePath tiled(MoeExpertPath::Tiled);
  const Bf16DotMode on(1);
  const Case c{90, 136, 72, 12, 4, DType::BFloat16, DType::Float32, false, true};
  const CaseInputs in = make_inputs(c, 610);
  const MoeRouting r = moe_route(random_tensor({c.T, c.E}, DType::Float32, 611), c.k, MoeScoring::Softmax, true);
  std::vector<std::vector<double>> outs;
  for (int threads : {1, 2, 3}) {
    const ThreadsScope scope(threads);
    outs.push_back(values(moe_experts(in.x, r.weights, r.ids, in.experts, in.shared)));
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

TEST(MoeExpertsTiled, AutoKeepsDecodeOnGemv) {
  // One token per expert stays on the GEMV kernel, tens go to the tiled one; either way
  // the result matches the reference (the choice is a speed decision only).
  const Case decode{1, 64, 32, 8, 2, DType::BFloat16, DType::BFloat16};
  const CaseInputs in = make_inputs(decode, 90);
  const MoeRouting r = fixed_routing({2, 5}, 1, 2, 91);
  const Tensor automatic = check_routed(decode, in, r);
  const ForcePath gemv(MoeExpertPath::Gemv);
  EXPECT_EQ(values(automatic), values(moe_experts(in.x, r.weights, r.ids, in.experts)));
}

}  // namespace
