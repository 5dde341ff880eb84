// The one loop over Highway targets: a test body run once per SIMD target that a kernel
// family was compiled for and this CPU supports, with dispatch pinned to that target.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>
#include <string>

// A namespace of its own: kiln::testing would hide gtest's ::testing in test files that
// live in namespace kiln and write testing::Message().
namespace simd_targets {

// `compiled` is a family's HWY_* target bits (cpu::<family>_simd_targets()). Dispatch
// is unpinned again after each run, even when the body stops at a fatal assertion.
template <class Body>
void for_each(int64_t compiled, Body&& body) {
  const int64_t targets = compiled & hwy::SupportedTargets();
  ASSERT_NE(targets, 0);
  struct Unpin {
    ~Unpin() { hwy::SetSupportedTargetsForTest(0); }
  };
  for (int64_t rest = targets; rest != 0; rest &= rest - 1) {
    const int64_t target = rest & -rest;
    SCOPED_TRACE(std::string("target ") + hwy::TargetName(target));
    const Unpin unpin;
    hwy::SetSupportedTargetsForTest(target);
    body();
  }
}

}  // namespace simd_targets
