// Shared by the pre-tokenizer tests: the Qwen split pattern and a helper that returns
// the pieces one Split regex cuts a text into.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "llm/tokenizer_pretokenizer.h"

namespace kiln::llm::tok::testing_util {

inline constexpr std::string_view kQwen =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

using Pieces = std::vector<std::string>;

inline Pieces split(std::string_view pattern, std::string_view text) {
  const Regex regex(pattern, false, "test");
  std::vector<std::string_view> views;
  regex.split_isolated(text, views);
  return Pieces(views.begin(), views.end());
}

}  // namespace kiln::llm::tok::testing_util
