// The tiled moe_experts kernel packs FP8 expert rows into bf16 patterns once when an
// expert has more than one tile of tokens, and decodes every tile when it has one. A
// token's sums do not depend on the other tokens of its tile, so the same token run
// alone (one tile: decoded from FP8) and among many (packed) must give the same bits,
// on every SIMD target; and both match the float64 reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cpu/moe/moe_kernels.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/moe.h"
#include "kiln/ops/shape.h"
#include "bf16_dot_mode.h"
#include "moe_test_util.h"
#include "simd_targets.h"

namespace {

using namespace kiln;
using namespace moe_test;
using cpu::MoeExpertPath;

class ForceTiled {
 public:
  ForceTiled() { cpu::force_moe_expert_path(MoeExpertPath::Tiled); }
  ~ForceTiled() { cpu::force_moe_expert_path(MoeExpertPath::Auto); }
  ForceTiled(const ForceTiled&) = delete;
  ForceTiled& operator=(const ForceTiled&) = delete;
};

// Every token to experts 0 and 2 of E = 3 (k = 2), so both have T tokens: T > 4 packs.
MoeRouting two_experts(int64_t T, uint64_t seed) {
  MoeRouting r{add(abs(random_tensor({T, 2}, DType::Float32, seed)), Scalar(0.1)), empty({T, 2}, DType::Int32)};
  for (int64_t t = 0; t < T; ++t) {
    r.ids.data<int32_t>()[2 * t] = 2;
    r.ids.data<int32_t>()[2 * t + 1] = 0;
  }
  return r;
}

void check_packed_equals_unpacked(const Case& c, uint64_t seed) {
  SCOPED_TRACE(describe(c));
  const CaseInputs in = make_inputs(c, seed);
  const MoeRouting r = two_experts(c.T, seed + 1);
  const Tensor all = check_routed(c, in, r);  // packed, and against the reference
  for (int64_t t = 0; t < c.T; ++t) {
    const Tensor one = moe_experts(in.x.narrow(0, t, 1), r.weights.narrow(0, t, 1), r.ids.narrow(0, t, 1),
                                   in.experts, in.shared);
    EXPECT_EQ(values(one), values(all.narrow(0, t, 1).contiguous())) << "token " << t;
  }
}

TEST(MoeExpertsTiledPacked, Fp8PackedRowsGiveTheDecodedBits) {
  const ForceTiled tiled;
  // The packed FMA tiles run only off the bf16 dot path; on it, each lane of a vdpbf16ps
  // tile sums its own token, so the same property holds (and is checked below too).
  for (int mode : {0, 1}) {
    const bf16_dot_test::Bf16DotMode dot(mode);
    SCOPED_TRACE(bf16_dot_enabled() ? "bf16 dot path" : "float32 FMA tiles");
    simd_targets::for_each(cpu::moe_simd_targets(), [] {
      check_packed_equals_unpacked({13, 64, 40, 3, 2, DType::Float8_e4m3fn, DType::BFloat16}, 300);  // row scales
      // K with a partial decoder step (a tail) in gate/up (70) and down (37).
      check_packed_equals_unpacked({9, 70, 37, 3, 2, DType::Float8_e4m3fn, DType::Float32}, 310);
      // 128x128 block scales with partial blocks, and the shared expert (packed too).
      check_packed_equals_unpacked({6, 200, 130, 3, 2, DType::Float8_e4m3fn, DType::Float32, true, true}, 320);
    });
  }
}

}  // namespace
