// Views whose dims do not merge to the 6 that the strided kernels' push constants hold
// (7, 8, 12, 16 and 64 dims, reversed so that no neighbours merge, sliced, broadcast):
// copy/contiguous/clone, casts, a broadcast binary op, unary ops and an in-place copy into a strided window run
// on the device through the *_many_dims shaders (geometry in a storage buffer) and give
// the CPU's result. A view that merges to 6 or fewer records exactly one command, as
// before; a many-dims one records the geometry's upload and the dispatch.
//
// Tolerances: copies, casts, add and mul are exact (bit-identical to the CPU); sin as in
// test_vulkan_unary_math.cpp (4 ulp plus 2^-24 absolute), exp 3 + 2|x| ulp for |x| <= 2
// (7 ulp), plus one unit of a narrower result dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/vulkan.h"
#include "vulkan_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::expect_same_bits;
using testing::storage_eps;
using testing::uniform;
using VulkanManyDims = testing::VulkanTest;

constexpr double kEps32 = std::numeric_limits<float>::epsilon();

// The dims of a view reversed: its strides grow along the dims, so no two neighbours
// merge (every size is >= 2) and the loop has as many dims as the view.
Shape reversed_dims(int64_t n) {
  Shape dims(static_cast<size_t>(n));
  std::iota(dims.rbegin(), dims.rend(), 0);
  return dims;
}

// A [sizes...] tensor of values in [-2, 2) stored as dt, as a view with its dims reversed
// (CPU).
Tensor reversed_view(const Shape& sizes, uint64_t seed, DType dt) {
  return uniform(sizes, -2.0, 2.0, seed, dt).permute(reversed_dims(static_cast<int64_t>(sizes.size())));
}

struct RankCase {
  Shape sizes;  // of the base tensor, before its dims are reversed
};

const RankCase kRanks[] = {
    {{2, 3, 2, 5, 2, 3, 2}},                 // 7 dims
    {{3, 2, 2, 3, 2, 2, 3, 2}},              // 8 dims
    {{2, 2, 3, 2, 2, 2, 3, 2, 2, 2, 2, 3}},  // 12 dims
    {Shape(16, 2)},                          // 16 dims, 2^16 elements
};

std::string rank_name(const RankCase& c) { return std::to_string(c.sizes.size()) + " dims"; }

int64_t commands() { return vulkan_queue_stats().commands; }

TEST_F(VulkanManyDims, CopiesAndCastsOfUnmergeableViewsMatchCpu) {
  for (const RankCase& c : kRanks) {
    for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
      SCOPED_TRACE(rank_name(c) + " " + std::string(dtype_name(dt)));
      const Tensor x = reversed_view(c.sizes, 7, dt);
      const Tensor dx = uniform(c.sizes, -2.0, 2.0, 7, dt).to(kVulkan).permute(reversed_dims(x.dim()));
      expect_same_bits(dx.contiguous(), x.contiguous());
      expect_same_bits(dx.clone(), x.clone());
      expect_same_bits(dx.to(DType::Float32), x.to(DType::Float32));
      expect_same_bits(dx.to(DType::Float8_e4m3fn), x.to(DType::Float8_e4m3fn));
      // Every other element of the first and last dims as well: a sliced, reversed view.
      const Tensor sliced = x.slice(0, 0, std::nullopt, 2).slice(x.dim() - 1, 1, std::nullopt, 2);
      const Tensor dsliced = dx.slice(0, 0, std::nullopt, 2).slice(x.dim() - 1, 1, std::nullopt, 2);
      expect_same_bits(dsliced.contiguous(), sliced.contiguous());
    }
  }
}

TEST_F(VulkanManyDims, CopyIntoAnUnmergeableWindowMatchesCpu) {
  for (const RankCase& c : kRanks) {
    SCOPED_TRACE(rank_name(c));
    const Tensor src = uniform(c.sizes, -2.0, 2.0, 11);
    // The destination: the reversed view of a zero tensor, so dst is strided and src
    // contiguous; the rest of the storage stays zero.
    Tensor cpu_base = zeros(c.sizes);
    Tensor dev_base = zeros(c.sizes).to(kVulkan);
    const Shape reversed_sizes = cpu_base.permute(reversed_dims(src.dim())).sizes();
    const Tensor values = uniform(reversed_sizes, -2.0, 2.0, 12);
    cpu_base.permute(reversed_dims(src.dim())).copy_(values);
    dev_base.permute(reversed_dims(src.dim())).copy_(values.to(kVulkan));
    expect_same_bits(dev_base, cpu_base);
  }
}

TEST_F(VulkanManyDims, BroadcastBinaryOpsMatchCpu) {
  for (const RankCase& c : kRanks) {
    for (DType dt : {DType::Float32, DType::BFloat16}) {
      SCOPED_TRACE(rank_name(c) + " " + std::string(dtype_name(dt)));
      const Tensor a = reversed_view(c.sizes, 21, dt);
      // b broadcasts along every other dim (size 1, stride 0 once expanded), which breaks
      // every merge on its own.
      Shape b_sizes = a.sizes();
      for (size_t d = 0; d < b_sizes.size(); d += 2) b_sizes[d] = 1;
      const Tensor b = uniform(b_sizes, -2.0, 2.0, 22, dt);
      const Tensor da = uniform(c.sizes, -2.0, 2.0, 21, dt).to(kVulkan).permute(reversed_dims(a.dim()));
      const Tensor db = b.to(kVulkan);
      expect_same_bits(add(da, db), add(a, b));
      expect_same_bits(mul(db, da), mul(b, a));
      expect_same_bits(add(da, db, Scalar(0.5)), add(a, b, Scalar(0.5)));
      expect_same_bits(gt(da, db), gt(a, b));
      // The division, 2.5 ulp on the device.
      expect_close(div(da, db), div(a, b), 3 * kEps32 + storage_eps(dt), 0);
    }
  }
}

TEST_F(VulkanManyDims, UnaryOpsMatchCpu) {
  for (const RankCase& c : kRanks) {
    for (DType dt : {DType::Float32, DType::BFloat16}) {
      SCOPED_TRACE(rank_name(c) + " " + std::string(dtype_name(dt)));
      const Tensor x = reversed_view(c.sizes, 31, dt);
      const Tensor dx = uniform(c.sizes, -2.0, 2.0, 31, dt).to(kVulkan).permute(reversed_dims(x.dim()));
      expect_same_bits(neg(dx), neg(x));
      expect_same_bits(relu(dx), relu(x));
      expect_close(sin(dx), sin(x), 4 * kEps32 + storage_eps(dt), std::ldexp(1.0, -24));
      expect_close(exp(dx), exp(x), 7 * kEps32 + storage_eps(dt), 0);
    }
  }
}

// The most dims a kiln tensor may have (64): 16 of size 2 that cannot merge among 48 of
// size 1 (which the loop drops).
TEST_F(VulkanManyDims, TheLargestRankRuns) {
  const int64_t rank = 64;
  Shape sizes(static_cast<size_t>(rank), 1);
  for (int64_t d = 0; d < rank; d += 4) sizes[static_cast<size_t>(d)] = 2;  // 16 dims of 2
  const Tensor x = reversed_view(sizes, 41, DType::Float32);
  const Tensor dx = uniform(sizes, -2.0, 2.0, 41).to(kVulkan).permute(reversed_dims(rank));
  expect_same_bits(add(dx, dx), add(x, x));
  expect_same_bits(dx.contiguous(), x.contiguous());
}

TEST_F(VulkanManyDims, MergeableViewsStillRecordOneCommand) {
  // 12 dims that all merge (contiguous), and a transposed 2-D view: one dispatch each.
  const Tensor x = uniform({2, 2, 3, 2, 2, 2, 3, 2, 2, 2, 2, 3}, -2.0, 2.0, 51).to(kVulkan);
  const Tensor y = uniform({64, 48}, -2.0, 2.0, 52).to(kVulkan);
  vulkan_synchronize();
  int64_t before = commands();
  const Tensor s = add(x, x);
  EXPECT_EQ(commands() - before, 1);
  before = commands();
  const Tensor t = y.t().contiguous();
  EXPECT_EQ(commands() - before, 1);
  // A reversed 7-dim view: the geometry's upload and the dispatch.
  const Tensor r = uniform({2, 3, 2, 5, 2, 3, 2}, -2.0, 2.0, 53).to(kVulkan).permute(reversed_dims(7));
  before = commands();
  const Tensor u = r.contiguous();
  EXPECT_EQ(commands() - before, 2);
}

}  // namespace
}  // namespace kiln
