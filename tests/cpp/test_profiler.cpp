// The op profiler: what it records (calls, bytes, FLOPs, phases), that a composite's inner
// ops count as the composite, and that nothing is recorded while it is off.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/op_profile.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linear.h"
#include "kiln/profiler.h"

using namespace kiln;

namespace {

const profiler::OpRecord* find(const profiler::Report& r, const std::string& phase, const std::string& op) {
  const auto it = std::find_if(r.ops.begin(), r.ops.end(),
                               [&](const profiler::OpRecord& o) { return o.phase == phase && o.op == op; });
  return it == r.ops.end() ? nullptr : &*it;
}

}  // namespace

TEST(Profiler, RecordsCallsBytesAndFlopsPerPhase) {
  const Tensor w = randn({64, 32}, DType::BFloat16);
  const Tensor x = randn({3, 32}, DType::BFloat16);
  profiler::start();
  {
    profiler::PhaseScope phase("decode");
    phase.add_tokens(2);
    linear(x, w);
    linear(x, w);
    add(x, x);
  }
  linear(x, w);  // outside any phase
  const profiler::Report r = profiler::stop();

  const profiler::OpRecord* lin = find(r, "decode", "linear");
  ASSERT_NE(lin, nullptr);
  EXPECT_EQ(lin->calls, 2);
  // Weights + x + y, in bf16; 2 FLOPs per multiply-add.
  EXPECT_DOUBLE_EQ(lin->bytes, 2.0 * (64 * 32 + 3 * 32 + 3 * 64) * 2);
  EXPECT_DOUBLE_EQ(lin->flops, 2.0 * (2.0 * 3 * 64 * 32));
  EXPECT_GT(lin->seconds, 0);
  const profiler::OpRecord* sum = find(r, "decode", "add");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->calls, 1);
  EXPECT_DOUBLE_EQ(sum->bytes, 3.0 * 3 * 32 * 2);
  const profiler::OpRecord* outside = find(r, "", "linear");
  ASSERT_NE(outside, nullptr);
  EXPECT_EQ(outside->calls, 1);

  ASSERT_EQ(r.phases.size(), 1u);
  EXPECT_EQ(r.phases[0].phase, "decode");
  EXPECT_EQ(r.phases[0].tokens, 2);
  EXPECT_GE(r.phases[0].seconds, lin->seconds + sum->seconds);

  const std::string text = r.format(10.0);
  EXPECT_NE(text.find("profile: decode"), std::string::npos) << text;
  EXPECT_NE(text.find("linear"), std::string::npos) << text;
  EXPECT_NE(text.find("(between kernels)"), std::string::npos) << text;
  EXPECT_NE(text.find("(no phase)"), std::string::npos) << text;
}

TEST(Profiler, InnerOpsCountAsTheOuterOne) {
  const Tensor x = randn({16}, DType::Float32);
  profiler::start();
  {
    const OpProfile outer("composite_op", [] { return OpCost{100, 0}; });
    add(x, x);
    mul(x, x);
  }
  const profiler::Report r = profiler::stop();
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].op, "composite_op");
  EXPECT_EQ(r.ops[0].calls, 1);
  EXPECT_DOUBLE_EQ(r.ops[0].bytes, 100);
}

TEST(Profiler, OffRecordsNothingAndStartClears) {
  const Tensor x = randn({16}, DType::Float32);
  EXPECT_FALSE(profiler::enabled());
  add(x, x);
  profiler::start();
  EXPECT_TRUE(profiler::enabled());
  const profiler::Report empty = profiler::stop();
  EXPECT_TRUE(empty.ops.empty());
  EXPECT_TRUE(empty.phases.empty());

  profiler::start();
  add(x, x);
  profiler::start();  // clears what the first start recorded
  const profiler::Report r = profiler::stop();
  EXPECT_TRUE(r.ops.empty());
  EXPECT_FALSE(profiler::enabled());
}

TEST(Profiler, ErrorsInsideAnOpLeaveTheDepthBalanced) {
  const Tensor a = randn({3}, DType::Float32);
  const Tensor b = randn({4}, DType::Float32);
  profiler::start();
  EXPECT_THROW(add(a, b), Error);  // refused before its kernel: nothing recorded
  add(a, a);
  const profiler::Report r = profiler::stop();
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.ops[0].op, "add");
  EXPECT_EQ(r.ops[0].calls, 1);
}
