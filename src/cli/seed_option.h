// The --seed option of the commands that take one.
#pragma once

#include <cstdint>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace kiln::cli {

// Adds --seed to `cmd`, stored in `seed`: a decimal integer in [0, 2^64 - 1]. CLI11's own
// conversion wraps "-1" to 2^64 - 1 and accepts values past the range, so a mistyped seed
// would silently pick another random stream; this option refuses both and says the range.
CLI::Option* add_seed_option(CLI::App& cmd, uint64_t& seed, const char* description);

}  // namespace kiln::cli
