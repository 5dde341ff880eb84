// Forces kiln's bf16 dot switch (KILN_BF16_DOT) for a scope, so a test can run the
// float32 path and the bf16 dot path of the same kernel. Process-wide: tests run one at a
// time.
#pragma once

#include <gtest/gtest.h>

#include "kiln/cpu_features.h"

namespace bf16_dot_test {

class Bf16DotMode {
 public:
  // mode: 0 forces the float32 path, 1 the bf16 dot path where the CPU has it.
  explicit Bf16DotMode(int mode) { kiln::set_bf16_dot_enabled(mode); }
  ~Bf16DotMode() { kiln::set_bf16_dot_enabled(-1); }
  Bf16DotMode(const Bf16DotMode&) = delete;
  Bf16DotMode& operator=(const Bf16DotMode&) = delete;
};

}  // namespace bf16_dot_test

// Skips a test of the bf16 dot kernel itself on CPUs without the instruction.
#define SKIP_WITHOUT_BF16_DOT()                                                                     \
  if (!kiln::cpu_has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16: the bf16 dot kernel " \
                                                 "is not run here (the float32 path is tested)"
