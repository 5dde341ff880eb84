// Hugging Face pre-tokenizer patterns rewritten for PCRE2 where the two disagree.
//
// Hugging Face tokenizers runs these patterns through Oniguruma (the Rust regex crate in
// some builds); both take \s as Unicode White_Space. PCRE2's Unicode \s also matches
// U+180E MONGOLIAN VOWEL SEPARATOR, which left White_Space in Unicode 6.3, so " \u180E"
// would split differently. \s and \S, inside or outside a character class, become
// explicit classes of White_Space; everything else passes through unchanged.
//
// Not covered (see docs/llm.md): PCRE2 10.42's property tables are Unicode 14, so
// letters and digits added in Unicode 15 and 16 are not \p{L} / \p{N} here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm::tok {

struct Pcre2Pattern {
  std::string text;
  // Per byte of `text`, and one past its end: the offset in the original pattern it came
  // from (so a PCRE2 error offset can name the place the file's author wrote).
  std::vector<size_t> source_offset;
};

Pcre2Pattern pcre2_pattern(std::string_view pattern);

}  // namespace kiln::llm::tok
