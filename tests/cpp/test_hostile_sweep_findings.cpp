// Issue 9: what the hostile sweep found after the first round of fixes, at the C++
// level. rand in narrow dtypes stays in [0, 1) (drawn as multiples of 2^-digits, as
// PyTorch does); log_softmax subtracts the max and then log(sum) (huge values no longer
// lose -log n); chunk of an empty dim gives `chunks` pieces as PyTorch; sizes at the
// edges get the op's own message (a huge slice step, eye too large for memory, an
// expanded index, outputs of ops built on the generic output allocation, scratch counts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/context.h"
#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/reduce.h"
#include "kiln/ops/shape.h"
#include "nn_test_utils.h"
#include "test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using nn_test::to_doubles;

struct NarrowFloat {
  DType dtype;
  int digits;  // significand bits, the implicit one included
};

TEST(HostileSweepFindings, RandInNarrowDtypesStaysBelowOne) {
  for (const NarrowFloat f : {NarrowFloat{DType::BFloat16, 8}, NarrowFloat{DType::Float16, 11},
                              NarrowFloat{DType::Float8_e4m3fn, 4}, NarrowFloat{DType::Float8_e5m2, 3}}) {
    Generator g(42);
    const Tensor x = rand({100000}, f.dtype, &g);
    ASSERT_EQ(x.dtype(), f.dtype);
    const double step = std::ldexp(1.0, -f.digits);
    double top = 0.0, sum = 0.0;
    for (const double v : to_doubles(x)) {
      ASSERT_GE(v, 0.0) << dtype_name(f.dtype);
      ASSERT_LT(v, 1.0) << dtype_name(f.dtype);
      ASSERT_EQ(v / step, std::floor(v / step)) << dtype_name(f.dtype) << ": " << v << " is not a multiple of 2^-"
                                                << f.digits;
      top = std::max(top, v);
      sum += v;
    }
    EXPECT_EQ(top, 1.0 - step) << dtype_name(f.dtype);  // 100,000 draws reach the largest value
    EXPECT_NEAR(sum / 100000, (1.0 - step) / 2, 0.01) << dtype_name(f.dtype);
  }
  // float32 and float64 keep their full resolution.
  Generator g(7);
  const std::vector<double> f32 = to_doubles(rand({1000}, DType::Float32, &g));
  EXPECT_TRUE(std::any_of(f32.begin(), f32.end(), [](double v) { return v * 4096 != std::floor(v * 4096); }));
}

TEST(HostileSweepFindings, LogSoftmaxOfHugeValuesKeepsMinusLogN) {
  for (const DType dt : {DType::Float32, DType::BFloat16, DType::Float16, DType::Float64}) {
    const double big = dt == DType::Float16 ? 60000.0 : dt == DType::Float64 ? 1e300 : 3e38;
    const Tensor x = full({3, 4}, Scalar(big), dt);
    for (const int64_t dim : {0, 1}) {
      const double want = -std::log(static_cast<double>(x.size(dim)));
      const double tol = dt == DType::BFloat16 ? 8e-3 : dt == DType::Float16 ? 1e-3 : 1e-6;
      for (const double v : to_doubles(log_softmax(x, dim))) {
        EXPECT_NEAR(v, want, tol * std::fabs(want)) << dtype_name(dt) << " dim " << dim;
      }
    }
  }
  // A scalar's log_softmax is exactly 0, whatever its value.
  EXPECT_EQ(log_softmax(scalar_tensor(Scalar(1.5), DType::Float32), 0).item().to_double(), 0.0);
}

TEST(HostileSweepFindings, ChunkOfAnEmptyDimGivesEveryChunk) {
  const std::vector<Tensor> pieces = chunk(zeros({0, 3}), 3, 0);
  ASSERT_EQ(pieces.size(), 3u);
  for (const Tensor& p : pieces) EXPECT_EQ(p.sizes(), (Shape{0, 3}));
  EXPECT_EQ(chunk(zeros({5}), 4).size(), 3u);  // 2, 2, 1 as split(2)
}

TEST(HostileSweepFindings, SliceWithAHugeStep) {
  const Tensor t = arange(Scalar(int64_t{0}), Scalar(int64_t{10}), Scalar(int64_t{1}));
  const Tensor a = t.slice(0, std::nullopt, std::nullopt, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(a.sizes(), (Shape{1}));
  EXPECT_EQ(a.item().to_int64(), 0);
  const Tensor b = t.slice(0, 3, std::nullopt, int64_t{1} << 62);
  EXPECT_EQ(b.sizes(), (Shape{1}));
  EXPECT_EQ(b.item().to_int64(), 3);
}

TEST(HostileSweepFindings, SizesAtTheEdgesNameTheOp) {
  expect_error([] { eye(int64_t{1} << 31); }, ErrorKind::Runtime, "eye: ");
  try {
    eye(int64_t{1} << 31);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("setStorage"), std::string::npos) << e.what();
  }
  // 2^50 rows of 16 bytes: the output is refused before the index's 2^50 entries are read.
  const Tensor index = zeros({1}, DType::Int64).expand({int64_t{1} << 50});
  expect_error([&] { index_select(zeros({3, 4}), 0, index); }, ErrorKind::Runtime,
               "index_select: not enough memory: you tried to allocate");
  // Outputs of ops that share the generic output allocation name the op, not "empty".
  const Tensor huge = ones({1}).expand({int64_t{1} << 40, int64_t{1} << 20});
  expect_error([&] { add(huge, huge); }, ErrorKind::Runtime, "add: not enough memory");
  expect_error([&] { exp(huge); }, ErrorKind::Runtime, "exp: not enough memory");
  expect_error([&] { cumsum(huge, 1); }, ErrorKind::Runtime, "cumsum: not enough memory");
  expect_error([&] { cat({huge, huge}, 0); }, ErrorKind::Runtime, "cat: Storage size calculation overflowed");
}

TEST(HostileSweepFindings, ScratchCountsAreChecked) {
  const ExecutionContext ctx = current_context();
  expect_error([&] { ctx.scratch_of<double>(0, int64_t{1} << 61); }, ErrorKind::Runtime,
               "ExecutionContext::scratch: not enough memory: scratch for 2305843009213693952 elements of 8 bytes");
  expect_error([&] { ctx.scratch_of<float>(0, -1); }, ErrorKind::Runtime, "ExecutionContext::scratch");
  float* p = ctx.scratch_of<float>(0, 16);
  ASSERT_NE(p, nullptr);
  p[15] = 1.0f;  // usable in full
}

}  // namespace
}  // namespace kiln
