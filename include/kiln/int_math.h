// Integer arithmetic that every layer needs (block and panel counts), defined once.
#pragma once

#include <cstdint>

namespace kiln {

// a / b rounded up, for a >= 0 and b > 0.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace kiln
