#include "cli/seed_option.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <string>
#include <system_error>

namespace kiln::cli {

CLI::Option* add_seed_option(CLI::App& cmd, uint64_t& seed, const char* description) {
  const CLI::Validator seed_range(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        // from_chars takes no sign, so "-1" and "+1" stop at the first character.
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || ptr != end) {
          return "the seed must be an integer in [0, 18446744073709551615] (2^64 - 1), got '" + text + "'";
        }
        return {};
      },
      "UINT64");
  return cmd.add_option("--seed", seed, description)->check(seed_range);
}

}  // namespace kiln::cli
