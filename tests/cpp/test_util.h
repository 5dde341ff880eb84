// Helpers every C++ test file may use.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kiln/error.h"

namespace kiln::testing {

// Expects `fn` to throw kiln::Error of `kind` whose message contains `needle`.
template <typename F>
void expect_error(F&& fn, ErrorKind kind, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace kiln::testing
